package bench_test

import (
	"testing"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/bench/benchtest"
)

// TestPublishedTraces checks the loader against the published traces: every
// line is valid, and the counts match the files.
func TestPublishedTraces(t *testing.T) {
	for _, tc := range []struct {
		file             string
		requests, blocks int
		accesses         int
	}{
		{"conversation_trace.jsonl", 12031, 182790, 288500},
		{"synthetic_trace.jsonl", 3993, 43924, 121877},
	} {
		t.Run(tc.file, func(t *testing.T) {
			reqs, err := bench.LoadTrace(benchtest.TracePath(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != tc.requests {
				t.Errorf("%d requests, want %d", len(reqs), tc.requests)
			}
			tr := benchtest.OpenTestTrace(t, tc.file)
			if tr.Requests() != tc.requests || tr.Blocks() != tc.blocks || tr.Accesses() != tc.accesses {
				t.Errorf("trace has %d requests, %d blocks, %d accesses; want %d, %d, %d",
					tr.Requests(), tr.Blocks(), tr.Accesses(), tc.requests, tc.blocks, tc.accesses)
			}
			ids, n := tr.Request(0)
			if tr.HashID(ids[0]) != reqs[0].HashIDs[0] || n != int64(reqs[0].InputLength) {
				t.Errorf("first request does not match the file")
			}
		})
	}
}
