package index

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yuebing/yuebing/block"
)

// keyNodes is the layout Global did not take: one roaring bitmap of node ids
// per key and tier. It lives here, behind the same operations, so the
// comparison in docs/cluster.md can be rerun (BenchmarkGlobalLayouts,
// BenchmarkGlobalRebuild). It is complete enough to be checked against Global
// (TestKeyNodesAgrees) and no more.
type keyNodes struct {
	mu    sync.RWMutex
	m     map[block.Key]*keyHolders
	known map[uint32]bool // nodes that may hold something
	// prefix and perTier are Query's scratch, indexed by node id.
	prefix  []int
	perTier [][MaxTiers]int
}

type keyHolders struct {
	tiers []*roaring.Bitmap // node ids per tier; nil when empty
}

func newKeyNodes() *keyNodes {
	return &keyNodes{m: map[block.Key]*keyHolders{}, known: map[uint32]bool{}}
}

func (x *keyNodes) addLocked(k block.Key, node uint32, tier uint8) {
	h := x.m[k]
	if h == nil {
		h = &keyHolders{}
		x.m[k] = h
	}
	for len(h.tiers) <= int(tier) {
		h.tiers = append(h.tiers, nil)
	}
	if h.tiers[tier] == nil {
		h.tiers[tier] = roaring.New()
	}
	h.tiers[tier].Add(node)
}

func (x *keyNodes) removeLocked(k block.Key, node uint32, tier uint8) {
	h := x.m[k]
	if h == nil || int(tier) >= len(h.tiers) || h.tiers[tier] == nil {
		return
	}
	h.tiers[tier].Remove(node)
	if h.tiers[tier].IsEmpty() {
		h.tiers[tier] = nil
	}
	for _, bm := range h.tiers {
		if bm != nil {
			return
		}
	}
	delete(x.m, k)
}

func (x *keyNodes) apply(node uint32, cs []Change) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.known[node] = true
	for _, c := range cs {
		if c.Added {
			x.addLocked(c.Key, node, c.Tier)
		} else {
			x.removeLocked(c.Key, node, c.Tier)
		}
	}
}

// dropNodeLocked has to visit every key: nothing says what a node holds.
// A node never seen is skipped, so a rebuild from empty pays only inserts.
func (x *keyNodes) dropNodeLocked(node uint32) {
	if !x.known[node] {
		return
	}
	delete(x.known, node)
	for k, h := range x.m {
		for t := range h.tiers {
			x.removeLocked(k, node, uint8(t))
		}
	}
}

func (x *keyNodes) replaceNode(node uint32, full []Held) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropNodeLocked(node)
	x.known[node] = true
	for _, h := range full {
		x.addLocked(h.Key, node, h.Tier)
	}
}

func (x *keyNodes) removeNode(node uint32) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropNodeLocked(node)
}

// query walks the chain once: a node is still in the prefix at key i if it
// matched all i keys before, so each key costs one pass over its holders.
// It takes the write lock for its scratch arrays, which only flatters it.
func (x *keyNodes) query(chain []block.Key) []NodeMatch {
	x.mu.Lock()
	defer x.mu.Unlock()
	var touched []uint32
	for i, k := range chain {
		h := x.m[k]
		if h == nil {
			break
		}
		advanced := false
		for t, bm := range h.tiers {
			if bm == nil {
				continue
			}
			for it := bm.Iterator(); it.HasNext(); {
				n := it.Next()
				for int(n) >= len(x.prefix) {
					x.prefix = append(x.prefix, 0)
					x.perTier = append(x.perTier, [MaxTiers]int{})
				}
				if x.prefix[n] != i {
					continue // dropped out earlier, or counted in a faster tier
				}
				if i == 0 {
					touched = append(touched, n)
				}
				x.prefix[n]++
				x.perTier[n][t]++
				advanced = true
			}
		}
		if !advanced {
			break
		}
	}
	out := make([]NodeMatch, 0, len(touched))
	for _, n := range touched {
		out = append(out, NodeMatch{Node: n, PrefixLen: x.prefix[n], PerTier: x.perTier[n]})
		x.prefix[n], x.perTier[n] = 0, [MaxTiers]int{}
	}
	slices.SortFunc(out, func(a, b NodeMatch) int {
		if a.PrefixLen != b.PrefixLen {
			return b.PrefixLen - a.PrefixLen
		}
		return int(a.Node) - int(b.Node)
	})
	return out
}

// memoryBytes estimates the map (32-byte key, 8-byte pointer, about one
// control byte per slot at 7/8 load) and the bitmaps with their headers.
func (x *keyNodes) memoryBytes() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := int64(len(x.m)) * (32 + 8 + 1) * 8 / 7
	for _, h := range x.m {
		n += 24 + int64(cap(h.tiers))*8
		for _, bm := range h.tiers {
			if bm != nil {
				n += 64 + int64(bm.GetSizeInBytes())
			}
		}
	}
	return n
}

// layout is what the benchmarks measure of either layout.
type layout interface {
	apply(node uint32, cs []Change)
	replaceNode(node uint32, full []Held)
	removeNode(node uint32)
	query(chain []block.Key) []NodeMatch
	memoryBytes() int64
}

type globalLayout struct{ *Global }

func (g globalLayout) apply(node uint32, cs []Change) {
	if err := g.Apply(node, cs); err != nil {
		panic(err)
	}
}

func (g globalLayout) replaceNode(node uint32, full []Held) {
	if err := g.ReplaceNode(node, full); err != nil {
		panic(err)
	}
}

func (g globalLayout) removeNode(node uint32)              { g.RemoveNode(node) }
func (g globalLayout) query(chain []block.Key) []NodeMatch { return g.Query(chain) }
func (g globalLayout) memoryBytes() int64                  { return g.MemoryBytes() }

var layouts = []struct {
	name string
	new  func() layout
}{
	{"node-bitmaps", func() layout { return globalLayout{NewGlobal(GlobalOptions{})} }},
	{"key-bitmaps", func() layout { return newKeyNodes() }},
}

// TestKeyNodesAgrees checks the comparison layout against Global on random
// operations, so the benchmarks compare two correct implementations.
func TestKeyNodesAgrees(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	g, x := NewGlobal(GlobalOptions{}), newKeyNodes()
	keys := make([]block.Key, 200)
	for i := range keys {
		keys[i] = keyN(uint64(i))
	}
	for step := range 2000 {
		node := uint32(r.IntN(8))
		switch op := r.IntN(10); {
		case op < 7:
			cs := make([]Change, 1+r.IntN(10))
			for i := range cs {
				cs[i] = Change{Key: keys[r.IntN(len(keys))], Tier: uint8(r.IntN(2)), Added: r.IntN(3) > 0}
			}
			mustApply(t, g, node, cs...)
			x.apply(node, cs)
		case op < 9:
			full := make([]Held, r.IntN(40))
			for i := range full {
				full[i] = Held{Key: keys[r.IntN(len(keys))], Tier: uint8(r.IntN(2))}
			}
			if err := g.ReplaceNode(node, full); err != nil {
				t.Fatal(err)
			}
			x.replaceNode(node, full)
		default:
			g.RemoveNode(node)
			x.removeNode(node)
		}
		start := r.IntN(len(keys) - 8)
		chain := keys[start : start+r.IntN(8)]
		if got, want := g.Query(chain), x.query(chain); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("step %d (seed %d): Global %+v, keyNodes %+v", step, seed, got, want)
		}
	}
}
