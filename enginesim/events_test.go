package enginesim_test

import (
	"sync"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/enginesim"
	"github.com/yuebing/yuebing/kvevents"
)

// recorder keeps published KV events, and maps them to keys the way a
// router does.
type recorder struct {
	mu     sync.Mutex
	mapper *kvevents.Mapper
	held   map[block.Key]bool
}

func (r *recorder) Publish(evs []kvevents.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var u kvevents.Update
	r.mapper.Apply(kvevents.Batch{Events: evs}, &u)
	for _, c := range u.Changes {
		r.held[c.Key] = c.Tiers != 0
	}
	return nil
}

func (r *recorder) holds(keys []block.Key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, k := range keys {
		if r.held[k] {
			n++
		}
	}
	return n
}

// TestEngineKVEvents: the engine's events, keyed the router's way, name
// exactly the blocks its prefix cache holds: a prompt's blocks once its
// prefill ran, none of them once the cache evicted them.
func TestEngineKVEvents(t *testing.T) {
	m, err := kvevents.NewMapper(ns, layout.BlockTokens, 1<<16, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{mapper: m, held: map[block.Key]bool{}}
	e := engine(t, func(o *enginesim.Options) { o.Events = rec })

	a := prompt(1, 40*layout.BlockTokens)
	ka, _ := block.ChainKeys(ns, layout.BlockTokens, a)
	submit(t, e, a, 1)
	if n := rec.holds(ka); n != len(ka) {
		t.Fatalf("events say the engine holds %d of the prompt's %d blocks", n, len(ka))
	}
	// A prompt sharing a's first 20 blocks stores only its own 40.
	b := append(append([]uint32{}, a[:20*layout.BlockTokens]...), prompt(2, 40*layout.BlockTokens)...)
	kb, _ := block.ChainKeys(ns, layout.BlockTokens, b)
	submit(t, e, b, 1)
	if n := rec.holds(kb); n != len(kb) {
		t.Fatalf("after the second prompt events hold %d of its %d blocks", n, len(kb))
	}
	// 64 pages: b's 40 new blocks evicted 16 of a's unshared 20.
	if n := rec.holds(ka[20:]); n != 4 {
		t.Fatalf("events hold %d of a's 20 unshared blocks, want 4 after 16 evictions", n)
	}
}
