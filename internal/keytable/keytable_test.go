package keytable

import (
	"math/rand/v2"
	"testing"

	"github.com/yuebing/yuebing/block"
)

// val stands for what the callers keep: small, comparable.
type val struct{ tiers, spec int64 }

// TestModel runs random inserts, updates, removals and filters on a Table
// and on a Go map side by side, and checks they agree: growth,
// deletion's backward shifts, filters (whole and in chunks, as sweeps go)
// that delete mid-run, and the zero key.
func TestModel(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		rng := rand.New(rand.NewPCG(seed, 0))
		tb := New[val]()
		ref := map[block.Key]val{}
		keys := make([]block.Key, 300)
		for i := 1; i < len(keys); i++ { // keys[0] stays the zero key
			keys[i][rng.IntN(32)] = byte(i)
			keys[i][31] ^= byte(i >> 8)
		}
		for op := range 20000 {
			k := &keys[rng.IntN(len(keys))]
			switch r := rng.IntN(10); {
			case r < 5:
				h, isNew := tb.Upsert(k)
				if _, ok := ref[*k]; ok == isNew {
					t.Fatalf("seed %d op %d: upsert says new=%v, map holds it=%v", seed, op, isNew, ok)
				}
				v := val{tiers: int64(rng.IntN(3)), spec: int64(rng.IntN(4))}
				if v == (val{}) {
					v.spec = 1
				}
				*h, ref[*k] = v, v
			case r < 9:
				tb.Remove(k)
				delete(ref, *k)
			default:
				cut := int64(rng.IntN(4))
				keep := func(h *val) bool {
					if h.spec != 0 && h.spec <= cut {
						h.spec = 0
					}
					return h.tiers != 0 || h.spec != 0
				}
				if rng.IntN(2) == 0 {
					tb.Filter(keep)
				} else {
					chunk := 1 + rng.IntN(50)
					for next := tb.FilterSome(0, chunk, keep); next != 0; {
						next = tb.FilterSome(next, chunk, keep)
					}
				}
				for k, h := range ref {
					if keep(&h) {
						ref[k] = h
					} else {
						delete(ref, k)
					}
				}
			}
			if tb.Len() != len(ref) {
				t.Fatalf("seed %d op %d: table holds %d keys, map %d", seed, op, tb.Len(), len(ref))
			}
		}
		for i := range keys {
			got, want := tb.Find(&keys[i]), ref[keys[i]]
			_, ok := ref[keys[i]]
			if (got != nil) != ok || (got != nil && *got != want) {
				t.Fatalf("seed %d: key %d: table %v, map %v (held %v)", seed, i, got, want, ok)
			}
		}
	}
}
