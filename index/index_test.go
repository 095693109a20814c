package index

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/yuebing/yuebing/block"
)

func keyN(n uint64) block.Key {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	return sha256.Sum256(b[:])
}

func TestBasic(t *testing.T) {
	ix := New(Options{Shards: 1})
	k := keyN(1)
	if _, ok := ix.Get(k); ok {
		t.Fatal("Get on empty index found a key")
	}
	want := Entry{Tiers: 0b10, Flags: 3, Size: 1 << 20, Checksum: 0xdeadbeef, Loc: 1 << 40, PinnedUntil: 77, Access: 99}
	if !ix.Set(k, want) {
		t.Fatal("Set of a new key reported existing")
	}
	if got, ok := ix.Get(k); !ok || got != want {
		t.Fatalf("Get = %+v, %v; want %+v", got, ok, want)
	}
	if ix.Set(k, want) {
		t.Fatal("Set of an existing key reported new")
	}
	ix.Touch(k, 1234)
	if got, _ := ix.Get(k); got.Access != 1234 {
		t.Fatalf("Touch: access %d", got.Access)
	}
	e, existed := ix.Update(k, func(e Entry, ok bool) (Entry, bool) {
		if !ok {
			t.Fatal("Update did not see the entry")
		}
		e.Tiers = e.Tiers.With(0)
		return e, true
	})
	if !existed || e.Tiers != 0b11 {
		t.Fatalf("Update = %+v, %v", e, existed)
	}
	if _, existed := ix.Update(keyN(2), func(e Entry, ok bool) (Entry, bool) { return e, false }); existed {
		t.Fatal("Update with keep=false on a missing key reported existing")
	}
	if ix.Len() != 1 {
		t.Fatalf("Len %d, want 1", ix.Len())
	}
	if !ix.Delete(k) || ix.Delete(k) || ix.Contains(k) || ix.Len() != 0 {
		t.Fatal("Delete")
	}
}

func TestTierMask(t *testing.T) {
	var m TierMask
	if m.Top() != -1 {
		t.Fatal("empty Top")
	}
	m = m.With(3).With(1)
	if m.Top() != 1 || !m.Has(3) || m.Has(2) || m.Without(1).Top() != 3 {
		t.Fatalf("mask %v", m)
	}
}

// TestModel runs random operations against a plain map. One shard and a
// small key space force long probe runs, wrap-around, deletions in the
// middle of runs, table growth and chunk-0 doubling.
func TestModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	ix := New(Options{Shards: 1})
	model := map[block.Key]Entry{}
	keys := make([]block.Key, 3000)
	for i := range keys {
		keys[i] = keyN(uint64(i))
	}
	ops := 200_000
	if testing.Short() {
		ops = 50_000
	}
	for i := 0; i < ops; i++ {
		k := keys[r.IntN(len(keys))]
		switch op := r.IntN(10); {
		case op < 5:
			e := Entry{Tiers: TierMask(r.IntN(4)), Size: r.Uint32(), Checksum: r.Uint32(), Loc: r.Uint64()}
			_, had := model[k]
			if created := ix.Set(k, e); created == had {
				t.Fatalf("op %d (seed %d): Set created=%v, model had=%v", i, seed, created, had)
			}
			model[k] = e
		case op < 8:
			_, had := model[k]
			if got := ix.Delete(k); got != had {
				t.Fatalf("op %d (seed %d): Delete=%v, model had=%v", i, seed, got, had)
			}
			delete(model, k)
		default:
			got, ok := ix.Get(k)
			want, had := model[k]
			if ok != had || got != want {
				t.Fatalf("op %d (seed %d): Get=%+v,%v want %+v,%v", i, seed, got, ok, want, had)
			}
		}
	}
	if ix.Len() != len(model) {
		t.Fatalf("Len %d, model %d", ix.Len(), len(model))
	}
	for k, want := range model {
		if got, ok := ix.Get(k); !ok || got != want {
			t.Fatalf("final check (seed %d): %v", seed, k)
		}
	}
	// A full scan visits every entry exactly once, across small pages.
	seen := map[block.Key]int{}
	cur := uint64(0)
	for {
		cur = ix.Scan(cur, 7, func(k block.Key, e Entry) bool {
			seen[k]++
			if model[k] != e {
				t.Fatalf("Scan entry of %v differs", k)
			}
			return true
		})
		if cur == 0 {
			break
		}
	}
	if len(seen) != len(model) {
		t.Fatalf("Scan saw %d keys, want %d", len(seen), len(model))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("Scan saw %v %d times", k, n)
		}
	}
}

func TestScanStopAndResume(t *testing.T) {
	ix := New(Options{Shards: 4})
	for i := range 100 {
		ix.Set(keyN(uint64(i)), Entry{Size: uint32(i)})
	}
	seen := map[block.Key]bool{}
	cur := uint64(0)
	for rounds := 0; ; rounds++ {
		n := 0
		cur = ix.Scan(cur, 50, func(k block.Key, _ Entry) bool {
			seen[k] = true
			n++
			return n < 3 // stop after 3, resume from the next
		})
		if cur == 0 {
			break
		}
		if rounds > 1000 {
			t.Fatal("scan does not terminate")
		}
	}
	if len(seen) != 100 {
		t.Fatalf("saw %d of 100 keys", len(seen))
	}
}

func TestPrefixMatch(t *testing.T) {
	ix := New(Options{})
	chain := make([]block.Key, 10)
	for i := range chain {
		chain[i] = keyN(uint64(i))
	}
	for i := range 6 {
		tier := 0
		if i >= 4 {
			tier = 1
		}
		ix.Set(chain[i], Entry{Tiers: TierMask(0).With(tier).With(2)})
	}
	ix.Set(chain[7], Entry{Tiers: 1}) // after the gap: not part of the prefix
	m := ix.PrefixMatch(chain)
	if m.Len != 6 || m.PerTier[0] != 4 || m.PerTier[1] != 2 || m.PerTier[2] != 0 {
		t.Fatalf("PrefixMatch = %+v", m)
	}
	ix.Set(chain[2], Entry{Tiers: 0}) // present but held nowhere ends the prefix
	if m := ix.PrefixMatch(chain); m.Len != 2 {
		t.Fatalf("PrefixMatch with an empty tier set = %+v", m)
	}
	if m := ix.PrefixMatch(nil); m.Len != 0 {
		t.Fatal("empty chain")
	}
}

// TestConcurrentReadersSeeWholeEntries has writers rewrite entries whose
// fields are tied together (Checksum == ^Size, Loc == Size) while readers
// check the tie: a torn read through the sequence lock would break it. Keys
// that are never deleted must always be found.
func TestConcurrentReadersSeeWholeEntries(t *testing.T) {
	// Yield inside every writer's critical section, so readers run while an
	// entry is half written.
	testHookMidStore = runtime.Gosched
	t.Cleanup(func() { testHookMidStore = nil })
	ix := New(Options{Shards: 2})
	// Few stable keys, rewritten constantly, so readers often land inside
	// a writer's critical section.
	stable := make([]block.Key, 8)
	for i := range stable {
		stable[i] = keyN(uint64(i))
		ix.Set(stable[i], entryFor(uint32(i)))
	}
	churn := make([]block.Key, 2000)
	for i := range churn {
		churn[i] = keyN(uint64(10_000 + i))
	}
	var stop atomic.Bool
	var writers, readers sync.WaitGroup
	for w := range 2 {
		writers.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for !stop.Load() {
				k := churn[r.IntN(len(churn))]
				if r.IntN(2) == 0 {
					ix.Set(k, entryFor(r.Uint32()))
				} else {
					ix.Delete(k)
				}
				for range 4 {
					ix.Set(stable[r.IntN(len(stable))], entryFor(r.Uint32()))
				}
			}
		})
	}
	check := func(e Entry) {
		if e.Checksum != ^e.Size || e.Loc != uint64(e.Size) {
			t.Errorf("torn entry %+v", e)
		}
	}
	for g := range 2 {
		readers.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for i := 0; i < 200_000 && !t.Failed(); i++ {
				e, ok := ix.Get(stable[r.IntN(len(stable))])
				if !ok {
					t.Error("stable key not found")
					return
				}
				check(e)
				if e, ok := ix.Get(churn[r.IntN(len(churn))]); ok {
					check(e)
				}
			}
		})
	}
	readers.Go(func() {
		for i := 0; i < 200 && !t.Failed(); i++ {
			if m := ix.PrefixMatch(stable); m.Len != len(stable) {
				t.Errorf("PrefixMatch of stable keys = %d", m.Len)
			}
		}
	})
	readers.Wait()
	stop.Store(true)
	writers.Wait()
}

func entryFor(v uint32) Entry {
	return Entry{Size: v, Checksum: ^v, Loc: uint64(v), Tiers: 1}
}
