package main

import (
	"testing"

	"github.com/yuebing/yuebing/bench"
)

func TestThinSamples(t *testing.T) {
	r := &bench.Report{}
	r.Add(bench.Row{"name": "a/x", "trace": "a", "setup": "x"})
	for i := range 7 {
		r.Add(bench.Row{"trace": "a", "setup": "x", "t_s": 30 * (i + 1)})
		r.Add(bench.Row{"trace": "a", "setup": "y", "t_s": 30 * (i + 1)})
	}
	got := thinSamples(r, 3)
	var ts []any
	for _, row := range got.Results {
		ts = append(ts, row["t_s"])
	}
	// The summary row, then samples 3 and 6 of each run.
	want := []any{nil, 90, 90, 180, 180}
	if len(ts) != len(want) {
		t.Fatalf("rows %v, want %v", ts, want)
	}
	for i := range want {
		if ts[i] != want[i] {
			t.Fatalf("rows %v, want %v", ts, want)
		}
	}
}
