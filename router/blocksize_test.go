package router

import (
	"testing"

	"github.com/yuebing/yuebing/kvevents/kveventstest"
)

// TestRouterAdoptsEngineBlockSize: an engine whose events carry blocks of
// another size than the router's is matched with keys of its own size,
// never left unkeyable; the disagreement is counted and the engine's size
// shown in its status.
func TestRouterAdoptsEngineBlockSize(t *testing.T) {
	a, b := newSimEngine(t), newSimEngine(t)
	pub := kveventstest.Start(t)
	r := startRouter(t, Options{Engines: []Engine{
		{ID: "a", URL: a.srv.URL},
		{ID: "b", URL: b.srv.URL, Events: pub.Endpoint, Replay: pub.Replay},
	}})
	stats := r.EventStats("b")
	kveventstest.WaitFor(t, "the subscription", func() bool { return r.engines["b"].sub.Connected() })
	pub.Prime(func() bool { return stats.Batches.Load() > 0 })

	const engineBS = 2 * testBS
	shared := prompt(3, 8) // 8 router blocks, 4 of the engine's
	pub.Batch(false, kveventstest.Stored([]int64{1, 2, 3, 4}, nil, shared, engineBS))
	pub.Sync()
	kveventstest.WaitFor(t, "b's blocks", func() bool { return r.engines["b"].nblocks.Load() == 4 })
	for i := range 3 {
		// One token more each time, a trailing partial block.
		p, err := r.Prepare(Completions, body(t, append(shared[:len(shared):len(shared)], uint32(i)), false))
		if err != nil {
			t.Fatal(err)
		}
		plan, err := r.Decide(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		r.Done(plan)
		if d := plan.Decision; d.Prefill != "b" || d.PrefixTokens != len(shared) {
			t.Fatalf("request %d: placed on %s with %d cached tokens, want b with %d", i, d.Prefill, d.PrefixTokens, len(shared))
		}
	}
	if stats.Unkeyable.Load() != 0 || stats.OtherBlockSize.Load() != 1 {
		t.Fatalf("unkeyable %d, other block size %d; want 0 and 1", stats.Unkeyable.Load(), stats.OtherBlockSize.Load())
	}
	for _, es := range r.Status().Engines {
		if want := map[string]int{"a": testBS, "b": engineBS}[es.ID]; es.BlockSize != want {
			t.Errorf("engine %s: block size %d, want %d", es.ID, es.BlockSize, want)
		}
	}
}
