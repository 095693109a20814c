package tier_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/ssd"
	"github.com/yuebing/yuebing/tier/tiertest"
)

type hcfg struct {
	dram, ssd int64
	dir       string
	opts      tier.HierarchyOptions
}

func newHierarchy(t *testing.T, c hcfg) *tier.Hierarchy {
	t.Helper()
	if c.dir == "" {
		c.dir = t.TempDir()
	}
	d, err := dram.New(dram.Options{Capacity: c.dram})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssd.Open(ssd.Options{Dir: c.dir, Capacity: c.ssd, SegmentSize: 256 << 10, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	h, err := tier.NewHierarchy([]tier.Tier{d, s}, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func put(t *testing.T, h *tier.Hierarchy, k block.Key, v []byte) tier.PutResult {
	t.Helper()
	res, err := h.Put(t.Context(), k, v, tier.PutOptions{})
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return res
}

func get(t *testing.T, h *tier.Hierarchy, k block.Key, want []byte) int {
	t.Helper()
	hd, level, err := h.Get(t.Context(), k)
	if err != nil {
		t.Fatalf("Get %v: %v", k, err)
	}
	defer hd.Release()
	if !bytes.Equal(hd.Bytes(), want) {
		t.Fatalf("Get %v: wrong bytes", k)
	}
	return level
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestDemoteAndPromote(t *testing.T) {
	h := newHierarchy(t, hcfg{dram: 1 << 20, ssd: 16 << 20, opts: tier.HierarchyOptions{Promote: tier.PromoteAlways}})
	var keys []block.Key
	for i := range 40 {
		k := tiertest.Key(i)
		keys = append(keys, k)
		if res := put(t, h, k, tiertest.Value(k, 100_000)); !res.Created || res.Tier != "dram" {
			t.Fatalf("Put %d = %+v", i, res)
		}
	}
	// The newest blocks are in DRAM, the oldest were demoted to SSD.
	if lvl := get(t, h, keys[39], tiertest.Value(keys[39], 100_000)); lvl != 0 {
		t.Fatalf("newest block read from tier %d", lvl)
	}
	eventually(t, "demotions to finish", func() bool {
		_, _, err := h.Get(t.Context(), keys[0])
		return err == nil
	})
	if lvl := get(t, h, keys[0], tiertest.Value(keys[0], 100_000)); lvl != 1 && lvl != 0 {
		t.Fatalf("oldest block read from tier %d", lvl)
	}
	for _, k := range keys {
		get(t, h, k, tiertest.Value(k, 100_000)) // nothing was lost: SSD has room for all
	}
	st := h.Stats()
	if st.Tiers[0].Demotions == 0 || st.Blocks != 40 {
		t.Fatalf("stats %+v", st)
	}
	// A hit in SSD is promoted back to DRAM (asynchronously).
	eventually(t, "promotion", func() bool {
		hd, lvl, err := h.Get(t.Context(), keys[1])
		if err != nil {
			return false
		}
		hd.Release()
		return lvl == 0
	})
	if h.Stats().Tiers[0].Promotions == 0 {
		t.Fatal("no promotions counted")
	}
	// Dedup holds across tiers.
	if res := put(t, h, keys[2], []byte("other")); res.Created {
		t.Fatal("Put of a demoted key rewrote it")
	}
}

// TestSecondHitAdmission runs in a synctest bubble: synctest.Wait returns
// once the demotion and promotion workers are idle, so "no promotion
// happened" is checked after the worker had every chance to run one.
func TestSecondHitAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHierarchy(t, hcfg{dram: 1 << 20, ssd: 16 << 20}) // default: second-hit
		for i := range 30 {
			k := tiertest.Key(i)
			put(t, h, k, tiertest.Value(k, 100_000))
		}
		k := tiertest.Key(0)
		eventually(t, "demotion", func() bool { e, ok := h.Lookup(k); return ok && !e.Tiers.Has(0) })
		get(t, h, k, tiertest.Value(k, 100_000))
		synctest.Wait()
		if e, _ := h.Lookup(k); e.Tiers.Has(0) {
			t.Fatal("a single SSD hit was promoted under second-hit admission")
		}
		eventually(t, "promotion on the second hit", func() bool {
			get(t, h, k, tiertest.Value(k, 100_000))
			e, _ := h.Lookup(k)
			return e.Tiers.Has(0)
		})
	})
}

func TestLargeBlockGoesToSSD(t *testing.T) {
	h := newHierarchy(t, hcfg{dram: 1 << 20, ssd: 16 << 20})
	k := tiertest.Key(1)
	v := tiertest.Value(k, 3<<20)
	if res := put(t, h, k, v); res.Tier != "ssd" {
		t.Fatalf("3 MiB block with a 1 MiB DRAM tier landed in %s", res.Tier)
	}
	if lvl := get(t, h, k, v); lvl != 1 {
		t.Fatalf("read from tier %d", lvl)
	}
	if _, err := h.Put(t.Context(), tiertest.Key(2), make([]byte, 32<<20), tier.PutOptions{}); !errors.Is(err, tier.ErrTooLarge) {
		t.Fatalf("block larger than every tier: %v", err)
	}
}

func TestDeleteEverywhere(t *testing.T) {
	h := newHierarchy(t, hcfg{dram: 1 << 20, ssd: 16 << 20, opts: tier.HierarchyOptions{Promote: tier.PromoteAlways}})
	for i := range 30 {
		k := tiertest.Key(i)
		put(t, h, k, tiertest.Value(k, 100_000))
	}
	k := tiertest.Key(0)
	eventually(t, "a copy in both tiers", func() bool {
		get(t, h, k, tiertest.Value(k, 100_000))
		e, _ := h.Lookup(k)
		return e.Tiers.Has(0) && e.Tiers.Has(1)
	})
	if err := h.Delete(k); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Get(t.Context(), k); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("Get after Delete = %v", err)
	}
	for _, tr := range h.Tiers() {
		if _, err := tr.Stat(k); !errors.Is(err, tier.ErrNotFound) {
			t.Fatalf("tier %s still has the block", tr.Name())
		}
	}
	if err := h.Delete(k); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("second Delete = %v", err)
	}
}

func TestPinKeepsBlockInDRAM(t *testing.T) {
	h := newHierarchy(t, hcfg{dram: 1 << 20, ssd: 16 << 20})
	k := tiertest.Key(0)
	put(t, h, k, tiertest.Value(k, 100_000))
	if err := h.Pin(k, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 40; i++ {
		kk := tiertest.Key(i)
		put(t, h, kk, tiertest.Value(kk, 100_000))
	}
	if lvl := get(t, h, k, tiertest.Value(k, 100_000)); lvl != 0 {
		t.Fatalf("pinned block read from tier %d", lvl)
	}
	if e, _ := h.Lookup(k); e.PinnedUntil == 0 {
		t.Fatal("index does not record the pin")
	}
	if err := h.Pin(tiertest.Key(999), time.Now().Add(time.Hour)); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("Pin of a missing block = %v", err)
	}
}

func TestCreateWriter(t *testing.T) {
	h := newHierarchy(t, hcfg{dram: 1 << 20, ssd: 16 << 20})
	k := tiertest.Key(5)
	v := tiertest.Value(k, 200_000)
	w, err := h.Create(t.Context(), k, int64(len(v)), tier.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.ReadFrom(bytes.NewReader(v)); err != nil {
		t.Fatal(err)
	}
	if h.Contains(k) {
		t.Fatal("block visible before Commit")
	}
	if err := w.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	get(t, h, k, v)
	if _, err := h.Create(t.Context(), k, 10, tier.PutOptions{}); !errors.Is(err, tier.ErrExists) {
		t.Fatalf("Create of an existing key = %v", err)
	}
}

func TestPrefixMatchAcrossTiers(t *testing.T) {
	h := newHierarchy(t, hcfg{dram: 1 << 20, ssd: 16 << 20})
	toks := make([]uint32, 16*12)
	for i := range toks {
		toks[i] = uint32(i)
	}
	chain, _ := block.ChainKeys("t/m", 16, toks)
	for i := range 9 {
		put(t, h, chain[i], tiertest.Value(chain[i], 200_000))
	}
	eventually(t, "demotions", func() bool { return h.PrefixMatch(chain).PerTier[1] > 0 })
	m := h.PrefixMatch(chain)
	if m.Len != 9 || m.PerTier[0]+m.PerTier[1] != 9 || m.PerTier[0] == 0 {
		t.Fatalf("PrefixMatch = %+v", m)
	}
}

func TestRestartKeepsFlushedBlocks(t *testing.T) {
	dir := t.TempDir()
	h := newHierarchy(t, hcfg{dram: 4 << 20, ssd: 16 << 20, dir: dir})
	for i := range 20 {
		k := tiertest.Key(i)
		if _, err := h.Put(t.Context(), k, tiertest.Value(k, 100_000), tier.PutOptions{Meta: []byte(fmt.Sprint("name-", i))}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := h.Flush(t.Context())
	if err != nil || n != 20 {
		t.Fatalf("Flush = %d, %v", n, err)
	}
	h.Close()
	h = newHierarchy(t, hcfg{dram: 4 << 20, ssd: 16 << 20, dir: dir})
	if h.Len() != 20 {
		t.Fatalf("reopened hierarchy has %d blocks", h.Len())
	}
	for i := range 20 {
		k := tiertest.Key(i)
		if lvl := get(t, h, k, tiertest.Value(k, 100_000)); lvl != 1 {
			t.Fatalf("block %d read from tier %d after restart", i, lvl)
		}
		if info, lvl, _ := h.Stat(k); string(info.Meta) != fmt.Sprint("name-", i) || lvl != 1 {
			t.Fatalf("block %d metadata after restart: %q", i, info.Meta)
		}
	}
}

// TestOnDrop: a block that leaves the store by eviction is reported; one
// that is deleted is not.
func TestOnDrop(t *testing.T) {
	var mu sync.Mutex
	dropped := map[block.Key]bool{}
	h := newHierarchy(t, hcfg{dram: 1 << 20, ssd: 2 << 20})
	h.OnDrop(func(k block.Key) {
		mu.Lock()
		dropped[k] = true
		mu.Unlock()
	})
	put(t, h, tiertest.Key(0), tiertest.Value(tiertest.Key(0), 1000))
	h.Delete(tiertest.Key(0))
	for i := 1; i < 100; i++ {
		k := tiertest.Key(i)
		put(t, h, k, tiertest.Value(k, 100_000))
	}
	eventually(t, "drops", func() bool { mu.Lock(); defer mu.Unlock(); return len(dropped) > 0 })
	mu.Lock()
	defer mu.Unlock()
	if dropped[tiertest.Key(0)] {
		t.Fatal("a deleted block was reported as dropped")
	}
	for k := range dropped {
		if h.Contains(k) {
			t.Fatalf("dropped block %v is still in the store", k)
		}
	}
}

// TestModel runs seeded random operations against a plain map. A Get may
// miss (the block may have been evicted from every tier) but must never
// return wrong bytes or a deleted block; pinned blocks must not be lost;
// every tier stays within its capacity.
func TestModel(t *testing.T) {
	for _, whenFull := range []string{tier.DemoteWait, tier.DemoteDrop} {
		t.Run(whenFull, func(t *testing.T) {
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			h := newHierarchy(t, hcfg{dram: 2 << 20, ssd: 8 << 20, opts: tier.HierarchyOptions{
				DemoteWhenFull: whenFull, DemoteQueueBytes: 512 << 10, Promote: tier.PromoteAlways,
			}})
			var wg sync.WaitGroup
			for g := range 3 {
				wg.Go(func() { runModel(t, h, seed+uint64(g), g) })
			}
			wg.Wait()
		})
	}
}

func runModel(t *testing.T, h *tier.Hierarchy, seed uint64, g int) {
	r := rand.New(rand.NewPCG(seed, 11))
	model := map[block.Key]int{}    // key -> size of what was written
	deleted := map[block.Key]bool{} // deleted and not written since
	pinned := map[block.Key]bool{}
	ops := 1500
	if testing.Short() {
		ops = 400
	}
	for i := 0; i < ops && !t.Failed(); i++ {
		k := tiertest.Key(g*1_000_000 + r.IntN(120))
		switch op := r.IntN(20); {
		case op < 8:
			size := 1 + r.IntN(150_000)
			if _, ok := model[k]; ok {
				size = model[k]
			}
			res, err := h.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{})
			if err != nil {
				if !errors.Is(err, tier.ErrNoSpace) {
					t.Errorf("seed %d op %d: Put: %v", seed, i, err)
				}
				continue
			}
			if res.Created || model[k] == 0 {
				model[k] = size
			}
			delete(deleted, k)
		case op < 16:
			hd, _, err := h.Get(t.Context(), k)
			if err != nil {
				if !errors.Is(err, tier.ErrNotFound) {
					t.Errorf("seed %d op %d: Get: %v", seed, i, err)
				}
				if pinned[k] {
					t.Errorf("seed %d op %d: pinned block lost", seed, i)
				}
				continue
			}
			if deleted[k] {
				t.Errorf("seed %d op %d: deleted block came back", seed, i)
			}
			// A key deleted and put again with another size must never
			// read back its old value (a stale copy).
			if want, ok := model[k]; ok && hd.Len() != want {
				t.Errorf("seed %d op %d: Get returned a %d-byte value, the current one has %d", seed, i, hd.Len(), want)
			}
			if !bytes.Equal(hd.Bytes(), tiertest.Value(k, hd.Len())) {
				t.Errorf("seed %d op %d: Get returned wrong bytes", seed, i)
			}
			hd.Release()
		case op < 18:
			err := h.Delete(k)
			if err != nil && !errors.Is(err, tier.ErrNotFound) {
				t.Errorf("seed %d op %d: Delete: %v", seed, i, err)
			}
			delete(model, k)
			delete(pinned, k)
			deleted[k] = true
		default:
			if len(pinned) < 3 && h.Pin(k, time.Now().Add(time.Hour)) == nil {
				pinned[k] = true
			}
		}
		for _, st := range h.Stats().Tiers {
			if st.Used > st.Capacity {
				t.Errorf("seed %d op %d: tier %s uses %d of %d", seed, i, st.Name, st.Used, st.Capacity)
			}
		}
	}
	_ = fmt.Sprint()
}

// gatedTier is a real tier whose Put of one key waits at a gate: a disk
// that is slow for that write.
type gatedTier struct {
	tier.Tier
	key     block.Key
	entered chan struct{} // closed when the gated Put starts
	release chan struct{} // the gated Put goes on when this is closed
	puts    sync.Map      // key -> number of Puts that reached the tier
}

func (g *gatedTier) Put(ctx context.Context, k block.Key, v []byte, o tier.PutOptions) error {
	n, _ := g.puts.LoadOrStore(k, new(atomic.Int32))
	n.(*atomic.Int32).Add(1)
	if k == g.key {
		close(g.entered)
		<-g.release
	}
	return g.Tier.Put(ctx, k, v, o)
}

// TestSlowSSDPutBlocksOnlyItsKey: while one key's write to the SSD tier is
// stuck, the other keys of its stripe are read, written, pinned and
// deleted; a second put of the stuck key waits for the first and finds the
// block stored.
func TestSlowSSDPutBlocksOnlyItsKey(t *testing.T) {
	d, err := dram.New(dram.Options{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssd.Open(ssd.Options{Dir: t.TempDir(), Capacity: 16 << 20, SegmentSize: 256 << 10, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	slow := tiertest.Key(1)
	var same []block.Key // keys of slow's stripe
	for i := 2; len(same) < 3; i++ {
		if k := tiertest.Key(i); k[0] == slow[0] {
			same = append(same, k)
		}
	}
	g := &gatedTier{Tier: s, key: slow, entered: make(chan struct{}), release: make(chan struct{})}
	h, err := tier.NewHierarchy([]tier.Tier{d, g}, tier.HierarchyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	small := func(k block.Key) []byte { return tiertest.Value(k, 4<<10) }
	put(t, h, same[0], small(same[0]))
	put(t, h, same[1], small(same[1]))

	big := tiertest.Value(slow, 3<<20) // over the DRAM tier's size: SSD
	first, second := make(chan tier.PutResult, 1), make(chan tier.PutResult, 1)
	putAsync := func(out chan<- tier.PutResult) {
		r, err := h.Put(context.Background(), slow, big, tier.PutOptions{})
		if err != nil {
			t.Errorf("Put: %v", err)
		}
		out <- r
	}
	go putAsync(first)
	<-g.entered
	go putAsync(second)

	others := make(chan struct{})
	go func() {
		defer close(others)
		ctx := context.Background()
		if hd, _, err := h.Get(ctx, same[0]); err != nil {
			t.Errorf("Get: %v", err)
		} else {
			hd.Release()
		}
		if err := h.Pin(same[0], time.Now().Add(time.Hour)); err != nil {
			t.Errorf("Pin: %v", err)
		}
		if _, err := h.Put(ctx, same[2], small(same[2]), tier.PutOptions{}); err != nil {
			t.Errorf("Put: %v", err)
		}
		if err := h.Delete(same[1]); err != nil {
			t.Errorf("Delete: %v", err)
		}
	}()
	select {
	case <-others:
	case <-time.After(30 * time.Second):
		t.Fatal("operations on other keys of the stripe waited for the slow SSD write")
	}
	close(g.release)
	if r := <-first; !r.Created || r.Tier != "ssd" {
		t.Errorf("first put: %+v", r)
	}
	if r := <-second; r.Created {
		t.Errorf("second put of the same key: %+v, want it to find the block", r)
	}
	if n, _ := g.puts.Load(slow); n.(*atomic.Int32).Load() != 1 {
		t.Errorf("the slow key reached the SSD tier %d times", n.(*atomic.Int32).Load())
	}
	if lvl := get(t, h, slow, big); lvl != 1 {
		t.Errorf("slow key read from tier %d", lvl)
	}
	get(t, h, same[2], small(same[2]))
	if h.Contains(same[1]) {
		t.Error("a key deleted during the slow write is still stored")
	}
}

// A read is a hit or a miss of the store once, and a miss of every tier
// above the one serving it: of every tier when nothing serves it, whether
// Get found nothing or a front end reported the miss with Missed.
func TestMissesCountedPerTier(t *testing.T) {
	h := newHierarchy(t, hcfg{dram: 1 << 20, ssd: 16 << 20})
	k := tiertest.Key(1)
	v := tiertest.Value(k, 3<<20) // larger than DRAM: stored on SSD only
	put(t, h, k, v)
	f := func(wantHits, wantMisses int64, wantTiers [][2]int64) {
		t.Helper()
		st := h.Stats()
		if st.Hits != wantHits || st.Misses != wantMisses {
			t.Fatalf("store hits/misses %d/%d, want %d/%d", st.Hits, st.Misses, wantHits, wantMisses)
		}
		for i, ts := range st.Tiers {
			if got := [2]int64{ts.Hits, ts.Misses}; got != wantTiers[i] {
				t.Fatalf("tier %s hits/misses %v, want %v", ts.Name, got, wantTiers[i])
			}
		}
	}
	f(0, 0, [][2]int64{{0, 0}, {0, 0}})
	get(t, h, k, v)
	f(1, 0, [][2]int64{{0, 1}, {1, 0}})
	if _, _, err := h.Get(t.Context(), tiertest.Key(2)); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("Get of a missing block: %v", err)
	}
	f(1, 1, [][2]int64{{0, 2}, {1, 1}})
	h.Missed()
	f(1, 2, [][2]int64{{0, 3}, {1, 2}})
}
