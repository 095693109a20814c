package dram

import (
	"math/rand/v2"
	"sort"
	"testing"
)

func TestMapping(t *testing.T) {
	// Classes are monotonic in size and every size maps inside the tables.
	pfl, psl := 0, 0
	for size := int64(1); size < 1<<20; size++ {
		fl, sl := mapping(size)
		if fl < pfl || (fl == pfl && sl < psl) {
			t.Fatalf("mapping(%d) = %d,%d went back from %d,%d", size, fl, sl, pfl, psl)
		}
		if fl >= flCount || sl >= slCount {
			t.Fatalf("mapping(%d) = %d,%d out of range", size, fl, sl)
		}
		pfl, psl = fl, sl
	}
}

func TestAllocExactFit(t *testing.T) {
	a := newAllocator(1000)
	id := a.alloc(1000)
	if id == nilSpan || a.free != 0 {
		t.Fatalf("whole-arena alloc failed: id=%d free=%d", id, a.free)
	}
	if a.alloc(1) != nilSpan {
		t.Fatal("alloc from a full arena succeeded")
	}
	a.release(id)
	// A span in the request's own class that fits must be found even though
	// the rounded-up search skips that class.
	x := a.alloc(700)
	y := a.alloc(300)
	a.release(x)
	if got := a.alloc(690); got == nilSpan {
		t.Fatal("690 did not fit in a free 700")
	}
	_ = y
}

// TestAllocModel allocates and frees at random and checks, after every step,
// that live spans never overlap, lie inside the arena, and that free and used
// granules add up; at the end everything coalesces back into one span.
func TestAllocModel(t *testing.T) {
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 9))
	const total = 1 << 16
	a := newAllocator(total)
	live := map[int32]int64{}
	var used int64
	for step := 0; step < 20000; step++ {
		if r.IntN(3) != 0 || len(live) == 0 {
			size := int64(1 + r.IntN(1<<uint(r.IntN(12))))
			id := a.alloc(size)
			if id == nilSpan {
				if a.largestFree() >= size {
					t.Fatalf("seed %d step %d: alloc(%d) failed with a free span of %d", seed, step, size, a.largestFree())
				}
				continue
			}
			if a.spans[id].size != size {
				t.Fatalf("seed %d: alloc(%d) returned %d granules", seed, size, a.spans[id].size)
			}
			live[id] = size
			used += size
		} else {
			for id, size := range live {
				a.release(id)
				delete(live, id)
				used -= size
				break
			}
		}
		if a.free+used != total {
			t.Fatalf("seed %d step %d: free %d + used %d != %d", seed, step, a.free, used, total)
		}
		if step%500 == 0 {
			checkNoOverlap(t, a, live, total)
		}
	}
	for id := range live {
		a.release(id)
	}
	if a.free != total || a.largestFree() != total {
		t.Fatalf("seed %d: after freeing all, free=%d largest=%d, want %d", seed, a.free, a.largestFree(), total)
	}
}

func checkNoOverlap(t *testing.T, a *allocator, live map[int32]int64, total int64) {
	t.Helper()
	type iv struct{ off, end int64 }
	var ivs []iv
	for id := range live {
		s := a.spans[id]
		ivs = append(ivs, iv{s.off, s.off + s.size})
	}
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].off < ivs[j].off })
	for i, v := range ivs {
		if v.off < 0 || v.end > total {
			t.Fatalf("span [%d,%d) outside arena", v.off, v.end)
		}
		if i > 0 && ivs[i-1].end > v.off {
			t.Fatalf("spans [%d,%d) and [%d,%d) overlap", ivs[i-1].off, ivs[i-1].end, v.off, v.end)
		}
	}
}

func BenchmarkAllocRelease(b *testing.B) {
	a := newAllocator(1 << 24)
	ids := make([]int32, 256)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range ids {
		ids[i] = a.alloc(int64(1 + r.IntN(4096)))
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		j := i % len(ids)
		a.release(ids[j])
		ids[j] = a.alloc(int64(1 + r.IntN(4096)))
		i++
	}
}
