package replicate

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/yuebing/yuebing/block"
)

func TestWindow(t *testing.T) {
	const nb = 4
	type op struct {
		add    bool
		bucket int64
		n      uint32 // hits to add, or the sum wanted
	}
	f := func(name string, ops ...op) {
		t.Helper()
		var w window
		for i, o := range ops {
			if o.add {
				w.add(o.bucket, nb, o.n)
				continue
			}
			if got := w.sum(o.bucket, nb); got != o.n {
				t.Fatalf("%s: op %d: sum at bucket %d = %d, want %d", name, i, o.bucket, got, o.n)
			}
		}
	}
	add := func(b int64, n uint32) op { return op{true, b, n} }
	sum := func(b int64, n uint32) op { return op{false, b, n} }

	f("one bucket", add(10, 3), add(10, 2), sum(10, 5), sum(13, 5), sum(14, 0))
	f("slides", add(10, 1), add(11, 2), add(13, 4), sum(13, 7), sum(14, 6), sum(15, 4), sum(16, 4), sum(17, 0))
	// Writing a later bucket clears the buckets skipped over: the ring
	// slot of bucket 10 is reused by bucket 14.
	f("reuse", add(10, 5), add(14, 1), sum(14, 1), add(15, 1), sum(15, 2))
	f("jump past the window", add(10, 5), add(30, 2), sum(30, 2))
	// A late hit for a bucket still in the window counts there; one older
	// than the window is dropped.
	f("late", add(10, 1), add(12, 1), add(11, 4), sum(12, 6), add(8, 100), sum(12, 6), sum(14, 5))
	f("saturates", add(1, 1<<32-1), add(1, 5), add(2, 7), sum(2, 1<<32-1))
}

func keyOfInt(i uint64) block.Key {
	var k block.Key
	binary.LittleEndian.PutUint64(k[:], i)
	binary.LittleEndian.PutUint64(k[8:], i*0x9e3779b97f4a7c15)
	return k
}

func TestSketchNeverUnderestimates(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	s := newSketch(1024, seed)
	truth := map[uint64]uint32{}
	total := 0
	// 5000 keys over 1024 counters per row: plenty of collisions.
	for range 50_000 {
		i := uint64(r.IntN(5000))
		if r.IntN(10) == 0 {
			i = uint64(r.IntN(10)) // a few hot keys
		}
		n := uint32(1 + r.IntN(3))
		k := keyOfInt(i)
		est := s.add(&k, n)
		truth[i] += n
		total += int(n)
		if est < min(truth[i], 1<<16-1) {
			t.Fatalf("seed %d: estimate %d below the true count %d", seed, est, truth[i])
		}
	}
	// Count-min bound: over-estimates beyond e*N/width are rare (each row
	// independently exceeds N/width*e with probability at most 1/e; with
	// conservative update, far less).
	bad := 0
	for i, c := range truth {
		k := keyOfInt(i)
		if est := s.estimate(&k); float64(est) > float64(c)+2.72*float64(total)/1024 {
			bad++
		}
	}
	if bad > len(truth)/50 {
		t.Fatalf("seed %d: %d of %d estimates exceed the count-min bound", seed, bad, len(truth))
	}
}

func TestSketchAgesAndSaturates(t *testing.T) {
	s := newSketch(64, 1)
	k := keyOfInt(7)
	if got := s.add(&k, 40); got != 40 {
		t.Fatalf("first add = %d", got)
	}
	s.age(1) // one period: halved
	if got := s.estimate(&k); got != 20 {
		t.Fatalf("after one period = %d, want 20", got)
	}
	s.age(1) // same period again: no change
	if got := s.estimate(&k); got != 20 {
		t.Fatalf("aging twice in one period = %d, want 20", got)
	}
	s.age(3) // two more periods: quartered
	if got := s.estimate(&k); got != 5 {
		t.Fatalf("after three periods = %d, want 5", got)
	}
	s.age(100)
	if got := s.estimate(&k); got != 0 {
		t.Fatalf("after many periods = %d, want 0", got)
	}
	s.add(&k, 1<<20)
	if got := s.add(&k, 1<<20); got != 1<<16-1 {
		t.Fatalf("saturated estimate = %d", got)
	}
}

// TestSketchSeed: different seeds map keys to different counters, so a key
// set colliding under one seed does not under another.
func TestSketchSeed(t *testing.T) {
	a, b := newSketch(64, 1), newSketch(64, 2)
	same := 0
	for i := range uint64(100) {
		k := keyOfInt(i)
		ha, _ := a.hash(&k)
		hb, _ := b.hash(&k)
		if ha&a.mask == hb&b.mask {
			same++
		}
	}
	if same > 10 {
		t.Fatalf("%d of 100 keys land on the same counter under two seeds", same)
	}
}

func TestThresholds(t *testing.T) {
	c := mustCore(t, Options{HotHits: 10, HotFactor: 3, MaxReplicas: 4, KeepRatio: 0.5}, nil)
	for _, tc := range []struct {
		heat       uint32
		grow, keep int
	}{
		{0, 1, 1}, {4, 1, 1}, {5, 1, 2}, {9, 1, 2}, {10, 2, 2}, {15, 2, 3},
		{29, 2, 3}, {30, 3, 3}, {45, 3, 4}, {90, 4, 4}, {1 << 30, 4, 4},
	} {
		if g, k := c.target(c.grow, tc.heat), c.target(c.keep, tc.heat); g != tc.grow || k != tc.keep {
			t.Errorf("heat %d: grow %d keep %d, want %d %d", tc.heat, g, k, tc.grow, tc.keep)
		}
	}
}
