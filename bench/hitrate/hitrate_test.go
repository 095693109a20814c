package hitrate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/bench/benchtest"

	"github.com/yuebing/yuebing/tier/policy"
)

// TestHitratePublished replays both published traces and checks the
// findings docs/policies.md reports: the bounds hold, a 3M-token LRU cache
// reaches less than half of the unbounded hit rate (the paper's section
// 5.3.1), and the prefix policy beats LRU at every capacity, by at least
// 15% at 3M on the conversation trace. -short runs only 3M tokens.
func TestHitratePublished(t *testing.T) {
	caps := DefaultCapacities
	if testing.Short() {
		caps = []int64{3_000_000}
	}
	traces := []*bench.Trace{benchtest.OpenTestTrace(t, "conversation_trace.jsonl"), benchtest.OpenTestTrace(t, "synthetic_trace.jsonl")}
	cells, err := Run(t.Context(), Options{Traces: traces, Capacities: caps})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(traces) * (1 + len(caps)*(1+len(policy.Names))); len(cells) != want {
		t.Fatalf("%d cells, want %d", len(cells), want)
	}
	type at struct {
		trace, policy string
		cap           int64
	}
	rate := map[at]float64{}
	present := map[at]float64{}
	for _, c := range cells {
		rate[at{c.Trace, c.Policy, c.CapacityTokens}] = c.HitRate()
		present[at{c.Trace, c.Policy, c.CapacityTokens}] = bench.Ratio(float64(c.PresentHits), float64(c.Blocks))
		if c.ComputeSaved() < 0 || c.ComputeSaved() > 1 || c.HitRate() < 0 || c.HitRate() > 1 {
			t.Errorf("%+v: rates out of [0, 1]", c)
		}
	}
	for _, tr := range traces {
		unbounded := rate[at{tr.Name, PolicyUnbounded, 0}]
		prevBelady := 0.0
		for _, c := range caps {
			belady := rate[at{tr.Name, PolicyBelady, c}]
			bound := present[at{tr.Name, PolicyBelady, c}]
			if belady > unbounded || belady < prevBelady || bound < belady {
				t.Errorf("%s at %d: belady %.4f (present %.4f), unbounded %.4f, smaller cache %.4f", tr.Name, c, belady, bound, unbounded, prevBelady)
			}
			prevBelady = belady
			lru := rate[at{tr.Name, "lru", c}]
			for _, p := range policy.Names {
				if r := rate[at{tr.Name, p, c}]; r > bound {
					t.Errorf("%s at %d: %s hit rate %.4f above MIN's bound %.4f", tr.Name, c, p, r, bound)
				}
			}
			if pr := rate[at{tr.Name, "prefix", c}]; pr < lru {
				t.Errorf("%s at %d: prefix %.4f is below LRU %.4f", tr.Name, c, pr, lru)
			}
			if c == 3_000_000 && lru >= unbounded/2 {
				t.Errorf("%s: LRU at 3M reaches %.4f, at least half of unbounded %.4f", tr.Name, lru, unbounded)
			}
		}
	}
	if pr, lru := rate[at{"conversation", "prefix", 3_000_000}], rate[at{"conversation", "lru", 3_000_000}]; pr < 1.15*lru {
		t.Errorf("conversation at 3M: prefix %.4f is not 15%% above LRU %.4f", pr, lru)
	}

	// The report has one row per cell, each with the fields.
	var buf strings.Builder
	if err := Report(cells).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got struct{ Results []map[string]any }
	if err := json.Unmarshal([]byte(buf.String()), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Results) != len(cells) {
		t.Fatalf("%d rows for %d cells", len(got.Results), len(cells))
	}
	for _, row := range got.Results {
		for _, k := range []string{"name", "trace", "policy", "capacity_tokens", "hit_rate", "compute_saved"} {
			if _, ok := row[k]; !ok {
				t.Errorf("row %v has no %s", row, k)
			}
		}
		if row["policy"] == "prefix" && row["baseline"] != "lru" {
			t.Errorf("prefix row without the LRU baseline: %v", row)
		}
	}
}

func TestHitrateOptions(t *testing.T) {
	tr := benchtest.MustTrace(t, benchtest.Req(1, 2), benchtest.Req(1, 3))
	_, err := Run(context.Background(), Options{
		Traces: []*bench.Trace{tr}, Capacities: []int64{100}, Policies: []string{"nope"},
	})
	if !errors.Is(err, bench.ErrOptions) || !strings.Contains(err.Error(), "100 tokens") || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("got %v, want ErrOptions naming both problems", err)
	}
	if _, err := Run(context.Background(), Options{}); !errors.Is(err, bench.ErrOptions) {
		t.Fatalf("no trace: got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Options{Traces: []*bench.Trace{tr}, Capacities: []int64{1024}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: got %v", err)
	}
	cells, err := Run(context.Background(), Options{Traces: []*bench.Trace{tr}, Capacities: []int64{1024}, Policies: []string{"lru"}, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	// unbounded, belady, lru; both bounded caches hold the two blocks
	// request 2 needs, so all hit block 1: 1 of 4 accesses.
	if len(cells) != 3 {
		t.Fatalf("%d cells, want 3", len(cells))
	}
	for _, c := range cells {
		if c.HitRate() != 0.25 {
			t.Errorf("%s: hit rate %v, want 0.25", c.Policy, c.HitRate())
		}
	}
}
