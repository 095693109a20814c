package hitrate

import (
	"testing"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/bench/benchtest"

	"github.com/yuebing/yuebing/tier/policy"
)

// TestReplayThroughTierMatchesSimulator replays both traces through the real
// DRAM tier and through the simulator's policy cache: with the same policy
// code behind both, the hit rates must agree.
func TestReplayThroughTierMatchesSimulator(t *testing.T) {
	names := policy.Names
	capacities := []int64{3_000_000 / bench.TraceBlockTokens, 10_000_000 / bench.TraceBlockTokens}
	if testing.Short() {
		names = []string{"lru", "prefix"}
		capacities = capacities[:1]
	}
	for _, file := range []string{"conversation_trace.jsonl", "synthetic_trace.jsonl"} {
		trace := benchtest.OpenTestTrace(t, file)
		for _, name := range names {
			for _, capacity := range capacities {
				sim, err := bench.NewPolicyCache(name, capacity, trace.Blocks())
				if err != nil {
					t.Fatal(err)
				}
				want := bench.Replay(trace, sim)
				got, err := ReplayThroughTier(t.Context(), trace, name, capacity)
				if err != nil {
					t.Fatalf("%s/%s/%d: %v", trace.Name, name, capacity, err)
				}
				if got.HitBlocks != want.HitBlocks || got.Blocks != want.Blocks {
					t.Errorf("%s/%s/%d blocks: tier hit %d of %d, simulator %d of %d",
						trace.Name, name, capacity, got.HitBlocks, got.Blocks, want.HitBlocks, want.Blocks)
				}
			}
		}
	}
}
