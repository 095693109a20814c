package tier_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/ssd"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// A key deleted and put again with other bytes is a new block: no copy of
// the old one still moving between tiers may be served for it. These tests
// hold the old copy in flight at a gate, replace the block, and read.

// heldTier is a real tier whose Puts of one key stop at gates once armed:
// the first waits before writing (releaseBefore) and, once written, before
// returning (before).
type heldTier struct {
	tier.Tier
	key                   block.Key
	armed                 atomic.Bool
	once                  sync.Once
	releaseOnce           sync.Once
	beforeOnce            sync.Once
	entered, wrote        chan struct{} // closed when the first Put of key starts, and when it has written
	releaseBefore, before chan struct{} // closed by the test to let it write, and to let it return
}

func newHeldTier(t tier.Tier, key block.Key) *heldTier {
	return &heldTier{Tier: t, key: key, entered: make(chan struct{}), wrote: make(chan struct{}),
		releaseBefore: make(chan struct{}), before: make(chan struct{})}
}

// heldHierarchy is 1 MiB of DRAM over 32 MiB of SSD, the tier at level
// held on key.
func heldHierarchy(t *testing.T, level int, key block.Key, opts tier.HierarchyOptions) (*tier.Hierarchy, *heldTier) {
	t.Helper()
	d, err := dram.New(dram.Options{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssd.Open(ssd.Options{Dir: t.TempDir(), Capacity: 32 << 20, SegmentSize: 256 << 10, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	tiers := []tier.Tier{d, s}
	g := newHeldTier(tiers[level], key)
	tiers[level] = g
	h, err := tier.NewHierarchy(tiers, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.release(); h.Close() })
	return h, g
}

// SetEvictHandler passes the hierarchy's handler on, so the wrapped tier
// still demotes what it evicts.
func (g *heldTier) SetEvictHandler(fn tier.EvictHandler) {
	if n, ok := g.Tier.(tier.EvictNotifier); ok {
		n.SetEvictHandler(fn)
	}
}

// letWrite lets the held Put write; letReturn lets it return. Each may be
// called again harmlessly.
func (g *heldTier) letWrite()  { g.releaseOnce.Do(func() { close(g.releaseBefore) }) }
func (g *heldTier) letReturn() { g.beforeOnce.Do(func() { close(g.before) }) }

// release opens both gates so a failed test does not leave the held Put
// behind.
func (g *heldTier) release() {
	g.letWrite()
	g.letReturn()
}

// deleteInFlight puts k, evicts it from DRAM until its demotion reaches the
// held SSD Put, and deletes it there: the demotion is cancelled but still
// to write its copy.
func deleteInFlight(t *testing.T, h *tier.Hierarchy, g *heldTier, k block.Key) {
	t.Helper()
	put(t, h, k, tiertest.Value(k, 100<<10))
	g.armed.Store(true)
	pushOutAsync(t, h, g)
	if err := h.Delete(k); err != nil {
		t.Fatal(err)
	}
}

func (g *heldTier) Put(ctx context.Context, k block.Key, v []byte, o tier.PutOptions) error {
	if k != g.key || !g.armed.Load() {
		return g.Tier.Put(ctx, k, v, o)
	}
	first := false
	g.once.Do(func() { first = true })
	if !first {
		return g.Tier.Put(ctx, k, v, o)
	}
	close(g.entered)
	<-g.releaseBefore
	err := g.Tier.Put(ctx, k, v, o)
	close(g.wrote)
	<-g.before
	return err
}

// pushOut puts filler blocks until key has no DRAM copy left (demoted, or
// gone from the store). Fillers are
// kept off the stripes in avoid, whose locks a held Put may own.
func pushOut(t *testing.T, h *tier.Hierarchy, key block.Key, next *int, avoid ...block.Key) {
	t.Helper()
	for n := 0; ; n++ {
		if e, ok := h.Lookup(key); !ok || !e.Tiers.Has(0) {
			return
		}
		if n > 400 {
			e, _ := h.Lookup(key)
			t.Fatalf("%v still in DRAM after %d filler puts (tiers %b, %+v)", key, n, e.Tiers, h.Stats())
		}
		k := tiertest.Key(*next)
		*next++
		if sameStripe(k, avoid) {
			continue
		}
		put(t, h, k, tiertest.Value(k, 64<<10))
	}
}

func sameStripe(k block.Key, keys []block.Key) bool {
	for _, o := range keys {
		if k[0] == o[0] {
			return true
		}
	}
	return false
}

// keyOffStripes returns the first test key from n on that shares no stripe
// with keys.
func keyOffStripes(n int, keys ...block.Key) (block.Key, int) {
	for ; ; n++ {
		if k := tiertest.Key(n); !sameStripe(k, keys) {
			return k, n + 1
		}
	}
}

// pushOutAsync fills DRAM until the held key's eviction reaches g's held
// Put.
func pushOutAsync(t *testing.T, h *tier.Hierarchy, g *heldTier) {
	t.Helper()
	go func() {
		for n := 0; ; n++ {
			select {
			case <-g.entered:
				return
			default:
			}
			f := tiertest.Key(2_000_000 + n)
			if _, err := h.Put(context.Background(), f, tiertest.Value(f, 64<<10), tier.PutOptions{}); err != nil {
				t.Errorf("filler Put: %v", err)
				return
			}
		}
	}()
	<-g.entered
}

// expectCurrentOrMiss reads key and fails on any bytes but want's.
func expectCurrentOrMiss(t *testing.T, h *tier.Hierarchy, key block.Key, want []byte) {
	t.Helper()
	hd, level, err := h.Get(t.Context(), key)
	if errors.Is(err, tier.ErrNotFound) {
		return
	}
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer hd.Release()
	if hd.Len() != len(want) {
		t.Fatalf("Get served a %d-byte copy from tier %d; the block put last has %d bytes", hd.Len(), level, len(want))
	}
}

// TestPromotionOfReplacedBlockSkipped: a read from SSD queues the block's
// promotion; the block is deleted, put again with other bytes and demoted
// before the promotion runs. The promotion must not write the old bytes
// into DRAM.
func TestPromotionOfReplacedBlockSkipped(t *testing.T) {
	// The single promotion worker is held on x's promotion while k's
	// waits behind it in the queue.
	x := tiertest.Key(0)
	k, next := keyOffStripes(1, x)
	h, g := heldHierarchy(t, 0, x, tier.HierarchyOptions{Promote: tier.PromoteAlways})
	g.letWrite()

	put(t, h, x, tiertest.Value(x, 2<<20)) // over DRAM's size: SSD only
	old := tiertest.Value(k, 100<<10)
	put(t, h, k, old)
	pushOut(t, h, k, &next, x)
	g.armed.Store(true)
	get(t, h, x, tiertest.Value(x, 2<<20))
	<-g.wrote // the worker holds x's promotion
	if lvl := get(t, h, k, old); lvl != 1 {
		t.Fatalf("old block read from tier %d, want SSD", lvl)
	}
	if err := h.Delete(k); err != nil {
		t.Fatal(err)
	}
	cur := tiertest.Value(k, 50<<10)
	put(t, h, k, cur)
	pushOut(t, h, k, &next, x)

	// A later read's promotion marks when the queue has drained past k's.
	y, _ := keyOffStripes(next+1000, x)
	put(t, h, y, tiertest.Value(y, 10<<10))
	pushOut(t, h, y, &next, x)
	get(t, h, y, tiertest.Value(y, 10<<10))
	g.letReturn()
	eventually(t, "the queue to drain", func() bool { e, _ := h.Lookup(y); return e.Tiers.Has(0) })
	expectCurrentOrMiss(t, h, k, cur)
}

// TestDemotionOntoLeftoverCopyRefused: the demotion of a block deleted in
// flight writes its copy into SSD and has not yet removed it when the
// block, put again with other bytes, is demoted in turn and finds the key
// taken. The new demotion must not index the old copy as the block.
func TestDemotionOntoLeftoverCopyRefused(t *testing.T) {
	k := tiertest.Key(0)
	h, g := heldHierarchy(t, 1, k, tier.HierarchyOptions{DemoteWorkers: 2, Promote: tier.PromoteNever})
	next := 1
	deleteInFlight(t, h, g, k)
	cur := tiertest.Value(k, 50<<10)
	put(t, h, k, cur)
	g.letWrite()
	// The deleted copy is in SSD, its demotion not yet undone, when the
	// new copy's demotion runs.
	<-g.wrote
	pushOut(t, h, k, &next)
	expectCurrentOrMiss(t, h, k, cur)
}

// TestPutOntoLeftoverCopy: a put too large for DRAM lands in SSD, where the
// deleted block's copy still sits (its demotion cancelled, not yet
// undone). The put must store its own bytes, and the undo must not remove
// them.
func TestPutOntoLeftoverCopy(t *testing.T) {
	k := tiertest.Key(0)
	// One demotion worker: a demotion that ends after the held one says
	// the held one's undo has run.
	h, g := heldHierarchy(t, 1, k, tier.HierarchyOptions{Promote: tier.PromoteNever, DemoteWorkers: 1})
	next := 1
	deleteInFlight(t, h, g, k)
	g.letWrite()
	<-g.wrote
	cur := tiertest.Value(k, 2<<20) // over DRAM's size: straight to SSD
	if lvl := put(t, h, k, cur).Tier; lvl != "ssd" {
		t.Fatalf("put landed in %s", lvl)
	}
	g.letReturn()
	f := tiertest.Key(3_000_000)
	put(t, h, f, tiertest.Value(f, 64<<10))
	pushOut(t, h, f, &next)
	if e, _ := h.Lookup(f); !e.Tiers.Has(1) {
		t.Fatal("the marker block was not demoted")
	}
	if lvl := get(t, h, k, cur); lvl != 1 {
		t.Fatalf("read from tier %d", lvl)
	}
}
