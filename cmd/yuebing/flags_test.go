package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestParseTokenCount(t *testing.T) {
	f := func(in string, want int64, ok bool) {
		t.Helper()
		got, err := parseTokenCount(in)
		if (err == nil) != ok || (ok && got != want) {
			t.Errorf("parseTokenCount(%q) = %d, %v; want %d, ok=%v", in, got, err, want, ok)
		}
	}
	f("3M", 3_000_000, true)
	f("512K", 512_000, true)
	f("1.5G", 1_500_000_000, true)
	f("4096", 4096, true)
	f(" 10m ", 10_000_000, true)
	f("", 0, false)
	f("M", 0, false)
	f("-1", 0, false)
	f("-1M", 0, false)
	f("3T", 0, false)
	f("NaNM", 0, false)
	f("1e30", 0, false)
}

func TestBenchHitrateUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"bench", "hitrate"}, "--trace"},
		{[]string{"bench", "hitrate", "--trace", "x", "--capacity", "3Q"}, "--capacity"},
		{[]string{"bench", "hitrate", "--trace", "x", "--capacity", "100"}, "--capacity"},
		{[]string{"bench", "hitrate", "--trace", "x", "--policy", "lru,nope"}, "--policy"},
		{[]string{"bench", "pool", "--trace", "x", "--nodes", "0"}, "--nodes"},
		{[]string{"bench", "e2e"}, "--trace"},
		{[]string{"bench", "e2e", "--trace", "x", "--engines", "-1"}, "--engines"},
		{[]string{"bench", "e2e", "--trace", "x", "--scale", "-2"}, "--scale"},
		{[]string{"bench", "e2e", "--trace", "x", "--rounds", "-1"}, "--rounds"},
		{[]string{"bench", "e2e", "--trace", "x", "--layout", "gpt-9"}, "--layout"},
		{[]string{"bench", "e2e", "--router", "--trace", "x", "--routing", "conductor,fastest"}, "--routing"},
		{[]string{"bench", "e2e", "--router", "--trace", "x", "--ttft-slo", "-1s"}, "--ttft-slo"},
		{[]string{"bench", "e2e", "--router", "--trace", "x", "--load", "-0.5"}, "--load"},
		{[]string{"bench", "e2e", "--router", "--trace", "x", "--engines", "-1"}, "--engines"},
		{[]string{"engine-sim", "--layout", "gpt-9"}, "--layout"},
		{[]string{"engine-sim", "--block-tokens", "7"}, "--block-tokens"},
		{[]string{"engine-sim", "--yuebing", "ftp://x"}, "--yuebing"},
		{[]string{"engine-sim", "--pool-blocks", "0"}, "--pool-blocks"},
		{[]string{"engine-sim", "--time-scale", "0"}, "--time-scale"},
		{[]string{"engine-sim", "--prefill-profile", "/nonexistent/profile.csv"}, "--prefill-profile"},
	} {
		cmd := newRootCmd()
		cmd.SetArgs(tc.args)
		cmd.SetOut(&bytes.Buffer{})
		err := cmd.Execute()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%v: got %v, want a usage error naming %s", tc.args, err, tc.flag)
		}
	}
}
