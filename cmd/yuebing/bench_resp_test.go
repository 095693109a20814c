package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestBenchRespBadFlags: bad flags are a usage error naming each one, all
// reported at once, before anything starts.
func TestBenchRespBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--sizes", "4096,huge"}, []string{`--sizes: "huge" is not a size like 4096 or 1MiB`}},
		{[]string{"--dram-capacity", "lots"}, []string{`--dram-capacity: "lots" is not a size like 2GiB`}},
		{[]string{"--flow-chunk", "0"}, []string{`--flow-chunk: "0" is not a size like 32MiB`}},
		{[]string{"--clients", "10001"}, []string{"--clients: must be in [1, 10000]"}},
		{[]string{"--memory-keys", "-1", "--memory-dram", "x"}, []string{"--memory-keys must not be negative", `--memory-dram: "x"`}},
		{[]string{"--ssd-capacity", "-1", "--bytes", "x", "--redis-io-threads", "-1", "--repeat", "-1"}, []string{
			`--ssd-capacity: "-1"`, `--bytes: "x"`, "--redis-io-threads and --flow-clients must not be negative",
			"--pipeline and --repeat must not be negative"}},
	} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"bench", "resp-vs-redis"}, c.args...))
		var ue usageError
		err := root.Execute()
		if !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", c.args, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q lacks %q", c.args, err, w)
			}
		}
	}
}
