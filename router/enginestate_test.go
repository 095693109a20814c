package router

import (
	"errors"
	"testing"
	"time"

	"github.com/yuebing/yuebing/kvevents/kveventstest"
)

func engineStatus(r *Router, id string) EngineStatus {
	for _, es := range r.Status().Engines {
		if es.ID == id {
			return es
		}
	}
	return EngineStatus{}
}

// TestRouterEngineDownDropsView: an engine that goes down loses its view
// (it may have restarted empty); when it answers again it starts from
// what its events replay, never the old view. States are up, down and
// draining, each with the time it began.
func TestRouterEngineDownDropsView(t *testing.T) {
	a, b := newSimEngine(t), newSimEngine(t)
	pub := kveventstest.Start(t)
	r := startRouter(t, Options{ProbeInterval: time.Hour, Engines: []Engine{
		{ID: "a", URL: a.srv.URL},
		{ID: "b", URL: b.srv.URL, Events: pub.Endpoint, Replay: pub.Replay},
	}})
	stats := r.EventStats("b")
	kveventstest.WaitFor(t, "the subscription", func() bool { return r.engines["b"].sub.Connected() })
	pub.Prime(func() bool { return stats.Batches.Load() > 0 })
	shared := prompt(4, 8)
	pub.Batch(false, kveventstest.Stored([]int64{1, 2, 3, 4, 5, 6, 7, 8}, nil, shared, testBS))
	pub.Sync()
	kveventstest.WaitFor(t, "b's blocks", func() bool { return r.engines["b"].nblocks.Load() == 8 })
	up := engineStatus(r, "b")
	if up.State != StateUp || up.Since.IsZero() {
		t.Fatalf("b: %+v, want up since start", up)
	}

	r.markDown("b", errors.New("test"))
	down := engineStatus(r, "b")
	if down.State != StateDown || !down.Since.After(up.Since) || down.Blocks != 0 {
		t.Fatalf("b after going down: %+v, want down, later, no blocks", down)
	}
	r.markUp("b")
	if es := engineStatus(r, "b"); es.State != StateUp || es.Blocks != 0 {
		t.Fatalf("b back: %+v, want up with an empty view", es)
	}
	// Its next batch brings its replay: the eight blocks it still holds,
	// and the new one.
	pub.Batch(false, kveventstest.Stored([]int64{9}, int64(8), prompt(5, 1), testBS))
	pub.Sync()
	kveventstest.WaitFor(t, "b's replayed view", func() bool { return r.engines["b"].nblocks.Load() == 9 })

	if err := r.Deregister("a"); err != nil {
		t.Fatal(err)
	}
	if es := engineStatus(r, "a"); es.State != StateDraining {
		t.Fatalf("a deregistered: %+v, want draining", es)
	}
}
