package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

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
		{[]string{"bench", "http", "--value-size", "0"}, "--value-size"},
		{[]string{"bench", "http", "--mix", "1"}, "--mix"},
		{[]string{"bench", "http", "--concurrency", "0"}, "--concurrency"},
		{[]string{"bench", "http", "--duration", "-1s"}, "--duration"},
		{[]string{"bench", "http", "--dram-capacity", "lots"}, "--dram-capacity"},
		{[]string{"bench", "store", "--sizes", "x"}, "--sizes"},
		{[]string{"bench", "store", "--goroutines", "0"}, "--goroutines"},
		{[]string{"bench", "store", "--index-entries", "1"}, "--index-entries"},
		{[]string{"bench", "store", "--duration", "-1s"}, "--duration"},
		{[]string{"bench", "router", "--prompt-tokens", "-1"}, "--prompt-tokens"},
		{[]string{"bench", "python", "--python-dir", "/nonexistent"}, "--python-dir"},
		{[]string{"bench", "python", "--python-dir", "../../python", "--rounds", "-1"}, "--rounds"},
		{[]string{"bench", "python", "--python-dir", "../../python", "--dram-capacity", "1MiB"}, "--dram-capacity"},
		{[]string{"demo", "--engines", "0"}, "--engines"},
		{[]string{"demo", "--block-size", "-16"}, "--block-size"},
		{[]string{"bench", "e2e", "--trace", "x", "--dram-capacity", "lots"}, "--dram-capacity"},
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
