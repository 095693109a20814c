package scheduler

import (
	"math/rand/v2"
	"testing"

	"github.com/yuebing/yuebing/block"
)

// TestKeySetsModel runs random puts (adds, updates, deletes), lookups and
// global updates against a plain map. Keys come from a small pool, so
// probe runs collide, wrap around and shift back on delete; the zero key
// is in the pool too.
func TestKeySetsModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		tab := newKeySets()
		model := map[block.Key]instSet{}
		pool := make([]block.Key, 300)
		for i := 1; i < len(pool); i++ {
			pool[i] = testKey(string(rune('a'+i%26)) + string(rune(i)))
		}
		for op := range 5000 {
			k := pool[rng.IntN(len(pool))]
			switch r := rng.IntN(10); {
			case r < 5:
				var s instSet
				if rng.IntN(4) > 0 {
					s.add(rng.IntN(MaxInstances))
				}
				tab.put(&k, s)
				if s.empty() {
					delete(model, k)
				} else {
					model[k] = s
				}
			case r < 9:
				if got, want := tab.get(&k), model[k]; got != want {
					t.Fatalf("seed %d op %d: get %x = %v, want %v", seed, op, k[:4], got, want)
				}
			default:
				slot := rng.IntN(MaxInstances)
				tab.update(func(s *instSet) { s.remove(slot) })
				for mk, s := range model {
					s.remove(slot)
					if s.empty() {
						delete(model, mk)
					} else {
						model[mk] = s
					}
				}
			}
			if tab.len() != len(model) {
				t.Fatalf("seed %d op %d: len %d, want %d", seed, op, tab.len(), len(model))
			}
		}
		for _, k := range pool {
			if got, want := tab.get(&k), model[k]; got != want {
				t.Fatalf("seed %d: final get %x = %v, want %v", seed, k[:4], got, want)
			}
		}
	}
}
