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

func TestThinClusterSamples(t *testing.T) {
	r := &bench.Report{}
	r.Add(bench.Row{"name": "replay_local"})
	for i := range 5 {
		r.Add(bench.Row{"name": "replicas_local", "t_s": i})
	}
	got := thinClusterSamples(r, 2)
	if len(got.Results) != 3 || got.Results[1]["t_s"] != 1 || got.Results[2]["t_s"] != 3 {
		t.Fatalf("rows %v", got.Results)
	}
}
