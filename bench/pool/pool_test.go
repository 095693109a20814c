package pool

import (
	"errors"
	"testing"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/bench/benchtest"
)

// TestPoolPublished runs the paper's setup (10 nodes of 3M tokens) on both
// traces: the global pool and cache-aware routing must beat round-robin
// local caches, and the global pool must hit at least as well as a single
// cache of one node's size.
func TestPoolPublished(t *testing.T) {
	traces := []*bench.Trace{benchtest.OpenTestTrace(t, "conversation_trace.jsonl"), benchtest.OpenTestTrace(t, "synthetic_trace.jsonl")}
	cells, err := Run(t.Context(), Options{Traces: traces})
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
		single, _ := bench.NewPolicyCache("lru", 3_000_000/bench.TraceBlockTokens, tr.Blocks())
		if one := bench.Replay(tr, single).HitRate(); g < one {
			t.Errorf("%s: global pool %.4f below one node's cache %.4f", tr.Name, g, one)
		}
	}
	if r := Report(cells, Options{}); len(r.Results) != len(cells) || r.Results[2]["ratio"] == nil {
		t.Errorf("report rows %v", r.Results)
	}
}

// With one node the three setups are the same cache.
func TestPoolOneNode(t *testing.T) {
	tr := benchtest.MustTrace(t, benchtest.Req(1, 2, 3), benchtest.Req(1, 2, 4), benchtest.Req(5), benchtest.Req(1, 2, 3, 6), benchtest.Req(5, 7))
	cells, err := Run(t.Context(), Options{Traces: []*bench.Trace{tr}, Nodes: 1, NodeCapacity: 3 * bench.TraceBlockTokens})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cells[1:] {
		if c.HitBlocks != cells[0].HitBlocks {
			t.Fatalf("one node: %s hit %d, %s hit %d", cells[0].Setup, cells[0].HitBlocks, c.Setup, c.HitBlocks)
		}
	}
	if _, err := Run(t.Context(), Options{Traces: []*bench.Trace{tr}, Nodes: -1, Policy: "x"}); !errors.Is(err, bench.ErrOptions) {
		t.Fatalf("bad options: %v", err)
	}
}
