package bench

import (
	"errors"
	"testing"
)

// TestPoolPublished runs the paper's setup (10 nodes of 3M tokens) on both
// traces: the global pool and cache-aware routing must beat round-robin
// local caches, and the global pool must hit at least as well as a single
// cache of one node's size.
func TestPoolPublished(t *testing.T) {
	traces := []*Trace{openTestTrace(t, "conversation_trace.jsonl"), openTestTrace(t, "synthetic_trace.jsonl")}
	cells, err := Pool(t.Context(), PoolOptions{Traces: traces})
	if err != nil {
		t.Fatal(err)
	}
	rate := map[string]float64{}
	for _, c := range cells {
		rate[c.Trace+"/"+c.Setup] = c.HitRate()
	}
	for _, tr := range traces {
		rr, bp, g := rate[tr.Name+"/"+SetupRoundRobin], rate[tr.Name+"/"+SetupBestPrefix], rate[tr.Name+"/"+SetupGlobal]
		if g < 1.5*rr || bp <= rr {
			t.Errorf("%s: round-robin %.4f, best-prefix %.4f, global %.4f", tr.Name, rr, bp, g)
		}
		single, _ := newPolicyCache("lru", 3_000_000/TraceBlockTokens, tr.Blocks())
		if one := Replay(tr, single).HitRate(); g < one {
			t.Errorf("%s: global pool %.4f below one node's cache %.4f", tr.Name, g, one)
		}
	}
	if r := PoolReport(cells, PoolOptions{}); len(r.Results) != len(cells) || r.Results[2]["ratio"] == nil {
		t.Errorf("report rows %v", r.Results)
	}
}

// With one node the three setups are the same cache.
func TestPoolOneNode(t *testing.T) {
	tr := mustTrace(t, req(1, 2, 3), req(1, 2, 4), req(5), req(1, 2, 3, 6), req(5, 7))
	cells, err := Pool(t.Context(), PoolOptions{Traces: []*Trace{tr}, Nodes: 1, NodeCapacity: 3 * TraceBlockTokens})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cells[1:] {
		if c.HitBlocks != cells[0].HitBlocks {
			t.Fatalf("one node: %s hit %d, %s hit %d", cells[0].Setup, cells[0].HitBlocks, c.Setup, c.HitBlocks)
		}
	}
	if _, err := Pool(t.Context(), PoolOptions{Traces: []*Trace{tr}, Nodes: -1, Policy: "x"}); !errors.Is(err, ErrOptions) {
		t.Fatalf("bad options: %v", err)
	}
}
