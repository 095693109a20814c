package policy

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// historian is implemented by policies that remember evicted keys; their
// memory of them must stay bounded.
type historian interface{ historySize() int64 }

func (p *S3FIFO[K]) historySize() int64 { return p.ghost.size }
func (p *ARC[K]) historySize() int64    { return p.b1.size + p.b2.size }
func (p *Prefix[K]) historySize() int64 { return p.ghost.size }

// TestConformance drives every policy in Names through seeded random
// operations against a plain model of what the owner holds: a cache of
// fixed capacity with variable sizes, chains of parents and pinned keys.
// Every policy must keep the owner's bound, never pick a pinned or untracked
// victim, find a victim whenever one exists, and forget what it is told to.
func TestConformance(t *testing.T) {
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(20) {
				runModel(t, name, seed)
			}
		})
	}
}

func runModel(t *testing.T, name string, seed uint64) {
	t.Helper()
	const capacity = 40
	rng := rand.New(rand.NewPCG(seed, 1))
	p, err := New[int](name, capacity)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[int]int64{} // what the owner holds
	var used int64
	pinned := map[int]bool{}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: "+format, append([]any{seed}, args...)...)
	}
	evict := func() (int, bool) {
		k, ok := p.Evict(func(k int) bool { return !pinned[k] })
		evictable := 0
		for k := range sizes {
			if !pinned[k] {
				evictable++
			}
		}
		switch {
		case !ok && evictable > 0:
			fail("Evict found nothing among %d evictable keys", evictable)
		case ok && sizes[k] == 0:
			fail("Evict returned untracked key %d", k)
		case ok && pinned[k]:
			fail("Evict returned pinned key %d", k)
		}
		if ok {
			used -= sizes[k]
			delete(sizes, k)
		}
		return k, ok
	}
	for op := range 3000 {
		k := rng.IntN(120)
		switch r := rng.IntN(10); {
		case r < 5: // insert, as a tier does: make room, then add
			if sizes[k] != 0 {
				p.Access(k)
				continue
			}
			size := int64(1 + rng.IntN(4))
			for used+size > capacity {
				if _, ok := evict(); !ok {
					break
				}
			}
			if used+size > capacity {
				continue // everything is pinned; the owner refuses the put
			}
			info := Info[int]{Size: size}
			if k > 0 && rng.IntN(4) != 0 {
				info.Parent, info.HasParent = k-1, true // chains of consecutive keys
			}
			p.Add(k, info)
			sizes[k] = size
			used += size
		case r < 8:
			p.Access(k)
		case r < 9:
			p.Remove(k)
			if s, ok := sizes[k]; ok {
				used -= s
				delete(sizes, k)
			}
		default:
			if rng.IntN(2) == 0 {
				pinned[k] = !pinned[k]
			} else {
				evict()
			}
		}
		if used > capacity {
			fail("op %d: owner holds %d > capacity %d", op, used, capacity)
		}
		if p.Len() != len(sizes) {
			fail("op %d: Len %d, owner holds %d keys", op, p.Len(), len(sizes))
		}
		if h, ok := p.(historian); ok && h.historySize() > prefixGhostFactor*capacity {
			fail("op %d: remembers %d of evicted keys, more than %d", op, h.historySize(), prefixGhostFactor*capacity)
		}
	}
	// Drain: every key comes out exactly once, then nothing.
	clear(pinned)
	for len(sizes) > 0 {
		if _, ok := evict(); !ok {
			fail("drain stopped with %d keys left", len(sizes))
		}
	}
	if k, ok := p.Evict(nil); ok {
		fail("Evict on an empty policy returned %d", k)
	}
}

func TestAddTrackedPanics(t *testing.T) {
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			p, _ := New[string](name, 10)
			p.Add("a", Info[string]{})
			defer func() {
				if recover() == nil {
					t.Error("second Add of a tracked key did not panic")
				}
			}()
			p.Add("a", Info[string]{})
		})
	}
}

func TestNewCapacity(t *testing.T) {
	for _, c := range []int64{0, -1} {
		if _, err := New[int]("lru", c); !errors.Is(err, ErrCapacity) {
			t.Errorf("New with capacity %d: %v, want ErrCapacity", c, err)
		}
	}
}
