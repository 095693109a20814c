package router

import (
	"math/rand/v2"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// TestBlockTable runs random inserts, updates, removals and filters on a
// blockTable and on a Go map side by side, and checks they agree: growth,
// deletion's backward shifts, filters (whole and in chunks, as sweeps go)
// that delete mid-run, and the zero key.
func TestBlockTable(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		rng := rand.New(rand.NewPCG(seed, 0))
		tb := newBlockTable()
		ref := map[block.Key]held{}
		keys := make([]block.Key, 300)
		for i := 1; i < len(keys); i++ { // keys[0] stays the zero key
			keys[i][rng.IntN(32)] = byte(i)
			keys[i][31] ^= byte(i >> 8)
		}
		for op := range 20000 {
			k := &keys[rng.IntN(len(keys))]
			switch r := rng.IntN(10); {
			case r < 5:
				h, isNew := tb.upsert(k)
				if _, ok := ref[*k]; ok == isNew {
					t.Fatalf("seed %d op %d: upsert says new=%v, map holds it=%v", seed, op, isNew, ok)
				}
				v := held{tiers: index.TierMask(rng.IntN(3)), spec: int64(rng.IntN(4))}
				if v == (held{}) {
					v.spec = 1
				}
				*h, ref[*k] = v, v
			case r < 9:
				tb.remove(k)
				delete(ref, *k)
			default:
				cut := int64(rng.IntN(4))
				keep := func(h *held) bool {
					if h.spec != 0 && h.spec <= cut {
						h.spec = 0
					}
					return h.tiers != 0 || h.spec != 0
				}
				if rng.IntN(2) == 0 {
					tb.filter(keep)
				} else {
					chunk := 1 + rng.IntN(50)
					for next := tb.filterSome(0, chunk, keep); next != 0; {
						next = tb.filterSome(next, chunk, keep)
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
			if tb.len() != len(ref) {
				t.Fatalf("seed %d op %d: table holds %d keys, map %d", seed, op, tb.len(), len(ref))
			}
		}
		for i := range keys {
			got, want := tb.find(&keys[i]), ref[keys[i]]
			_, ok := ref[keys[i]]
			if (got != nil) != ok || (got != nil && *got != want) {
				t.Fatalf("seed %d: key %d: table %v, map %v (held %v)", seed, i, got, want, ok)
			}
		}
	}
}
