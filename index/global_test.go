package index

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/yuebing/yuebing/block"
)

func add(k block.Key, tier uint8) Change    { return Change{Key: k, Tier: tier, Added: true} }
func remove(k block.Key, tier uint8) Change { return Change{Key: k, Tier: tier} }

func mustApply(t *testing.T, g *Global, node uint32, cs ...Change) {
	t.Helper()
	if err := g.Apply(node, cs); err != nil {
		t.Fatalf("Apply(%d): %v", node, err)
	}
}

func TestGlobalApply(t *testing.T) {
	g := NewGlobal(GlobalOptions{})
	a, b := keyN(1), keyN(2)
	mustApply(t, g, 3, add(a, 0), add(a, 1), add(b, 1))
	mustApply(t, g, 5, add(a, 1))
	f := func(k block.Key, want ...Holder) {
		t.Helper()
		if got := g.Holders(k); !slices.Equal(got, want) {
			t.Fatalf("Holders = %v, want %v", got, want)
		}
		if got := g.ReplicaCount(k); got != len(want) {
			t.Fatalf("ReplicaCount = %d, want %d", got, len(want))
		}
	}
	f(a, Holder{3, 0b11}, Holder{5, 0b10})
	f(b, Holder{3, 0b10})
	f(keyN(9))
	if g.Len() != 2 || g.NodeLen(3) != 2 || g.NodeLen(5) != 1 || g.NodeLen(4) != 0 {
		t.Fatalf("Len %d, NodeLen(3) %d, NodeLen(5) %d", g.Len(), g.NodeLen(3), g.NodeLen(5))
	}
	if got := g.Nodes(); !slices.Equal(got, []uint32{3, 5}) {
		t.Fatalf("Nodes = %v", got)
	}

	// Idempotent: re-adding, removing what is absent, removing from a
	// tier that does not hold it.
	mustApply(t, g, 3, add(a, 0), remove(b, 0), remove(keyN(9), 1))
	f(a, Holder{3, 0b11}, Holder{5, 0b10})
	f(b, Holder{3, 0b10})

	// Removing one tier keeps the node a holder; removing the last drops it.
	mustApply(t, g, 3, remove(a, 0))
	f(a, Holder{3, 0b10}, Holder{5, 0b10})
	mustApply(t, g, 3, remove(a, 1), remove(b, 1))
	f(a, Holder{5, 0b10})
	f(b)
	if g.Len() != 1 || g.NodeLen(3) != 0 {
		t.Fatalf("Len %d, NodeLen(3) %d", g.Len(), g.NodeLen(3))
	}
	// A batch applies in order: add then remove leaves nothing.
	mustApply(t, g, 4, add(b, 0), remove(b, 0), add(a, 2), remove(a, 2), add(a, 2))
	f(a, Holder{4, 0b100}, Holder{5, 0b10})
	f(b)
}

func TestGlobalRanges(t *testing.T) {
	g := NewGlobal(GlobalOptions{MaxNodes: 8})
	k := keyN(1)
	if err := g.Apply(8, []Change{add(k, 0)}); !errors.Is(err, ErrNodeRange) {
		t.Fatalf("Apply to node 8 of 8: %v", err)
	}
	if err := g.ReplaceNode(1<<31, nil); !errors.Is(err, ErrNodeRange) {
		t.Fatalf("ReplaceNode of a huge id: %v", err)
	}
	// A bad tier anywhere in the batch rejects the whole batch.
	if err := g.Apply(1, []Change{add(k, 0), add(k, MaxTiers)}); !errors.Is(err, ErrTierRange) {
		t.Fatalf("Apply with tier 8: %v", err)
	}
	if err := g.ReplaceNode(1, []Held{{k, 0}, {k, 200}}); !errors.Is(err, ErrTierRange) {
		t.Fatalf("ReplaceNode with tier 200: %v", err)
	}
	if g.Len() != 0 || len(g.Nodes()) != 0 {
		t.Fatalf("a rejected batch changed the index: Len %d, Nodes %v", g.Len(), g.Nodes())
	}
	if g.RemoveNode(9) || g.RemoveNode(1) {
		t.Fatal("RemoveNode of an unknown node reported it known")
	}
	if err := (&GlobalOptions{MaxNodes: -1, BatchSize: -2, InitialBlocks: -3}).Validate(); err == nil {
		t.Fatal("Validate accepted negative options")
	}
}

func TestGlobalReplaceAndRemoveNode(t *testing.T) {
	g := NewGlobal(GlobalOptions{BatchSize: 2}) // several batches per call
	keys := make([]block.Key, 6)
	for i := range keys {
		keys[i] = keyN(uint64(i))
	}
	mustApply(t, g, 1, add(keys[0], 0), add(keys[1], 0), add(keys[2], 0))
	mustApply(t, g, 2, add(keys[2], 1))
	// Node 1 reconnects holding 2 (twice, and in two tiers), 3 and 4.
	err := g.ReplaceNode(1, []Held{{keys[2], 1}, {keys[3], 0}, {keys[2], 1}, {keys[4], 1}, {keys[2], 0}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]Holder{
		nil, nil,
		{{1, 0b11}, {2, 0b10}},
		{{1, 0b1}},
		{{1, 0b10}},
		nil,
	} {
		if got := g.Holders(keys[i]); !slices.Equal(got, want) {
			t.Fatalf("key %d: Holders = %v, want %v", i, got, want)
		}
	}
	if g.Len() != 3 || g.NodeLen(1) != 3 {
		t.Fatalf("Len %d, NodeLen(1) %d; want 3, 3", g.Len(), g.NodeLen(1))
	}
	// An empty full state keeps the node known, holding nothing.
	if err := g.ReplaceNode(1, nil); err != nil {
		t.Fatal(err)
	}
	if g.Len() != 1 || !slices.Equal(g.Nodes(), []uint32{1, 2}) {
		t.Fatalf("after empty ReplaceNode: Len %d, Nodes %v", g.Len(), g.Nodes())
	}
	if !g.RemoveNode(2) || g.RemoveNode(2) {
		t.Fatal("RemoveNode(2) twice")
	}
	if g.Len() != 0 || !slices.Equal(g.Nodes(), []uint32{1}) || g.ReplicaCount(keys[2]) != 0 {
		t.Fatalf("after RemoveNode: Len %d, Nodes %v", g.Len(), g.Nodes())
	}
	// Freed ids are reused without mixing keys up.
	mustApply(t, g, 3, add(keys[5], 0))
	if got := g.Holders(keys[5]); !slices.Equal(got, []Holder{{3, 1}}) || g.ReplicaCount(keys[2]) != 0 {
		t.Fatalf("after reuse: %v", got)
	}
}

func TestGlobalQuery(t *testing.T) {
	g := NewGlobal(GlobalOptions{})
	chain := make([]block.Key, 8)
	for i := range chain {
		chain[i] = keyN(uint64(100 + i))
	}
	// Node 0: keys 0-4, 0-1 in DRAM and SSD, 2-4 only on SSD.
	mustApply(t, g, 0, add(chain[0], 0), add(chain[0], 1), add(chain[1], 0), add(chain[1], 1),
		add(chain[2], 1), add(chain[3], 1), add(chain[4], 1))
	// Node 7: keys 0-1, then a gap, then 3 (not part of its prefix).
	mustApply(t, g, 7, add(chain[0], 1), add(chain[1], 0), add(chain[3], 0))
	// Node 2: only key 1: no prefix at all.
	mustApply(t, g, 2, add(chain[1], 0))
	// Node 4 holds 0-4 too: ties order by node id.
	mustApply(t, g, 4, add(chain[0], 0), add(chain[1], 0), add(chain[2], 0), add(chain[3], 0), add(chain[4], 0))
	want := []NodeMatch{
		{Node: 0, PrefixLen: 5, PerTier: [MaxTiers]int{2, 3}},
		{Node: 4, PrefixLen: 5, PerTier: [MaxTiers]int{5}},
		{Node: 7, PrefixLen: 2, PerTier: [MaxTiers]int{1, 1}},
	}
	if got := g.Query(chain); !slices.Equal(got, want) {
		t.Fatalf("Query = %+v\nwant %+v", got, want)
	}
	if got := g.Query(chain[5:]); got != nil {
		t.Fatalf("Query of an unheld chain = %+v", got)
	}
	if got := g.Query(nil); got != nil {
		t.Fatalf("Query(nil) = %+v", got)
	}
	// A key nobody holds ends every prefix, even if later keys are held.
	mustApply(t, g, 0, remove(chain[2], 1))
	mustApply(t, g, 4, remove(chain[2], 0))
	want = []NodeMatch{
		{Node: 0, PrefixLen: 2, PerTier: [MaxTiers]int{2}},
		{Node: 4, PrefixLen: 2, PerTier: [MaxTiers]int{2}},
		{Node: 7, PrefixLen: 2, PerTier: [MaxTiers]int{1, 1}},
	}
	if got := g.Query(chain); !slices.Equal(got, want) {
		t.Fatalf("Query after removal = %+v\nwant %+v", got, want)
	}
}

// globalModel is the plain-map model: key -> node -> tiers.
type globalModel map[block.Key]map[uint32]TierMask

func (m globalModel) set(k block.Key, node uint32, tiers TierMask) {
	if tiers == 0 {
		delete(m[k], node)
		if len(m[k]) == 0 {
			delete(m, k)
		}
		return
	}
	if m[k] == nil {
		m[k] = map[uint32]TierMask{}
	}
	m[k][node] = tiers
}

func (m globalModel) holders(k block.Key) []Holder {
	var hs []Holder
	for n, tiers := range m[k] {
		hs = append(hs, Holder{n, tiers})
	}
	slices.SortFunc(hs, func(a, b Holder) int { return int(a.Node) - int(b.Node) })
	return hs
}

func (m globalModel) query(chain []block.Key, nodes []uint32) []NodeMatch {
	var out []NodeMatch
	for _, n := range nodes {
		nm := NodeMatch{Node: n}
		for _, k := range chain {
			tiers := m[k][n]
			if tiers == 0 {
				break
			}
			nm.PrefixLen++
			nm.PerTier[tiers.Top()]++
		}
		if nm.PrefixLen > 0 {
			out = append(out, nm)
		}
	}
	slices.SortStableFunc(out, func(a, b NodeMatch) int { return b.PrefixLen - a.PrefixLen })
	return out
}

// TestGlobalModel runs random batches, full-state replacements and node
// removals against the plain-map model. A small key space makes ids free and
// get reused constantly; a small batch size splits every ReplaceNode.
func TestGlobalModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	g := NewGlobal(GlobalOptions{BatchSize: 7, MaxNodes: 12})
	model := globalModel{}
	known := map[uint32]bool{}
	keys := make([]block.Key, 300)
	for i := range keys {
		keys[i] = keyN(uint64(i))
	}
	steps := 4000
	if testing.Short() {
		steps = 1000
	}
	for step := range steps {
		node := uint32(r.IntN(12))
		switch op := r.IntN(20); {
		case op < 14:
			cs := make([]Change, 1+r.IntN(20))
			for i := range cs {
				cs[i] = Change{Key: keys[r.IntN(len(keys))], Tier: uint8(r.IntN(3)), Added: r.IntN(3) > 0}
			}
			mustApply(t, g, node, cs...)
			known[node] = true
			for _, c := range cs {
				tiers := model[c.Key][node]
				if c.Added {
					tiers = tiers.With(int(c.Tier))
				} else {
					tiers = tiers.Without(int(c.Tier))
				}
				model.set(c.Key, node, tiers)
			}
		case op < 18:
			full := make([]Held, r.IntN(60))
			for i := range full {
				full[i] = Held{Key: keys[r.IntN(len(keys))], Tier: uint8(r.IntN(3))}
			}
			if err := g.ReplaceNode(node, full); err != nil {
				t.Fatal(err)
			}
			known[node] = true
			for k := range model {
				model.set(k, node, 0)
			}
			for _, h := range full {
				model.set(h.Key, node, model[h.Key][node].With(int(h.Tier)))
			}
		default:
			if got := g.RemoveNode(node); got != known[node] {
				t.Fatalf("step %d (seed %d): RemoveNode(%d) = %v, want %v", step, seed, node, got, known[node])
			}
			delete(known, node)
			for k := range model {
				model.set(k, node, 0)
			}
		}

		// Check a few keys, a chain and the totals after every step.
		for range 3 {
			k := keys[r.IntN(len(keys))]
			if got, want := g.Holders(k), model.holders(k); !slices.Equal(got, want) {
				t.Fatalf("step %d (seed %d): Holders = %v, want %v", step, seed, got, want)
			}
			if got, want := g.ReplicaCount(k), len(model[k]); got != want {
				t.Fatalf("step %d (seed %d): ReplicaCount = %d, want %d", step, seed, got, want)
			}
			n := uint32(r.IntN(12))
			if got, want := g.NodeTiers(n, k), model[k][n]; got != want {
				t.Fatalf("step %d (seed %d): NodeTiers = %v, want %v", step, seed, got, want)
			}
		}
		start := r.IntN(len(keys) - 10)
		chain := keys[start : start+r.IntN(10)]
		nodes := g.Nodes()
		if got, want := g.Query(chain), model.query(chain, nodes); !slices.Equal(got, want) {
			t.Fatalf("step %d (seed %d): Query = %+v, want %+v", step, seed, got, want)
		}
		if g.Len() != len(model) {
			t.Fatalf("step %d (seed %d): Len %d, model %d", step, seed, g.Len(), len(model))
		}
		if len(nodes) != len(known) {
			t.Fatalf("step %d (seed %d): Nodes %v, model %v", step, seed, nodes, known)
		}
		for _, n := range nodes {
			want := 0
			for _, hs := range model {
				if hs[n] != 0 {
					want++
				}
			}
			if got := g.NodeLen(n); got != want {
				t.Fatalf("step %d (seed %d): NodeLen(%d) = %d, want %d", step, seed, n, got, want)
			}
		}
	}
}

// TestGlobalConcurrent runs writers on several nodes against readers under
// the race detector. Node 0's chain never changes, so every reader must see it
// whole; node 1 flips between two full states, so a reader must see either
// all of chain A or all of chain B on node 1, never a mix or a part: the
// batches of ReplaceNode are invisible.
func TestGlobalConcurrent(t *testing.T) {
	g := NewGlobal(GlobalOptions{BatchSize: 3})
	chainOf := func(base, n int) []block.Key {
		c := make([]block.Key, n)
		for i := range c {
			c[i] = keyN(uint64(base + i))
		}
		return c
	}
	stable, chainA, chainB := chainOf(0, 16), chainOf(1000, 40), chainOf(2000, 40)
	heldOf := func(c []block.Key, tier uint8) []Held {
		h := make([]Held, len(c))
		for i, k := range c {
			h[i] = Held{k, tier}
		}
		return h
	}
	if err := g.ReplaceNode(0, heldOf(stable, 0)); err != nil {
		t.Fatal(err)
	}
	if err := g.ReplaceNode(1, heldOf(chainA, 1)); err != nil {
		t.Fatal(err)
	}
	iters := 300
	if testing.Short() {
		iters = 100
	}
	var (
		stop    atomic.Bool
		writers sync.WaitGroup
		readers sync.WaitGroup
	)
	writers.Go(func() {
		for i := 0; !stop.Load(); i++ {
			full := heldOf(chainA, 1)
			if i%2 == 0 {
				full = heldOf(chainB, 1)
			}
			if err := g.ReplaceNode(1, full); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for w := range 2 {
		writers.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 3))
			node := uint32(2 + w)
			for !stop.Load() {
				cs := make([]Change, 8)
				for i := range cs {
					k := chainOf(r.IntN(3000), 1)[0]
					cs[i] = Change{Key: k, Tier: uint8(r.IntN(2)), Added: r.IntN(2) == 0}
				}
				if err := g.Apply(node, cs); err != nil {
					t.Error(err)
					return
				}
				if r.IntN(50) == 0 {
					g.RemoveNode(node)
				}
			}
		})
	}
	for range 2 {
		readers.Go(func() {
			for i := 0; i < iters && !t.Failed(); i++ {
				if got := g.Query(stable); len(got) == 0 || got[0].Node != 0 || got[0].PrefixLen != len(stable) {
					t.Errorf("stable chain: %+v", got)
				}
				for _, c := range [][]block.Key{chainA, chainB} {
					if n := prefixOf(g.Query(c), 1); n != 0 && n != len(c) {
						t.Errorf("node 1 holds %d of a %d-key chain: a torn ReplaceNode", n, len(c))
					}
				}
				if got := g.ReplicaCount(stable[3]); got < 1 {
					t.Errorf("ReplicaCount of a stable key = %d", got)
				}
				_ = g.MemoryBytes()
			}
		})
	}
	readers.Wait()
	stop.Store(true)
	writers.Wait()
	// Quiesced: node 1 holds exactly one of the chains.
	a, b := prefixOf(g.Query(chainA), 1), prefixOf(g.Query(chainB), 1)
	if a+b != 40 || (a != 0 && b != 0) {
		t.Fatalf("node 1 holds %d of A and %d of B", a, b)
	}
}

func prefixOf(ms []NodeMatch, node uint32) int {
	for _, m := range ms {
		if m.Node == node {
			return m.PrefixLen
		}
	}
	return 0
}

func ExampleGlobal() {
	g := NewGlobal(GlobalOptions{})
	chain := []block.Key{keyN(1), keyN(2), keyN(3)}
	// Node 4 reconnects holding the first two blocks, in DRAM (tier 0).
	_ = g.ReplaceNode(4, []Held{{chain[0], 0}, {chain[1], 0}})
	// Node 9 streams events: it stored the whole chain on SSD (tier 1).
	_ = g.Apply(9, []Change{{chain[0], 1, true}, {chain[1], 1, true}, {chain[2], 1, true}})
	for _, m := range g.Query(chain) {
		fmt.Printf("node %d: prefix %d, DRAM %d, SSD %d\n", m.Node, m.PrefixLen, m.PerTier[0], m.PerTier[1])
	}
	fmt.Println("replicas of block 0:", g.ReplicaCount(chain[0]))
	// Output:
	// node 9: prefix 3, DRAM 0, SSD 3
	// node 4: prefix 2, DRAM 2, SSD 0
	// replicas of block 0: 2
}
