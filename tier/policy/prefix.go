package policy

// Prefix is yuebing's prefix-aware policy: a segmented LRU that knows blocks
// form chains. docs/policies.md has the measurements behind each part.
//
//   - Two segments. A block seen once waits in probation; a block seen again
//     moves to the protected segment. On the Mooncake traces a block's
//     second use makes a third far more likely (0.42 against 0.24 on the
//     conversation trace, 0.84 against 0.42 on the synthetic one), and three
//     in four blocks are never used again, so proven blocks deserve the room.
//   - A long memory. Reuse distances are longer than the cache (the median
//     second use comes after twice a 3M-token cache's worth of other blocks),
//     so a block usually returns after it was evicted. Ghost entries remember
//     the use counts of recently evicted blocks, up to four times the
//     capacity, so a returning block is recognized as proven.
//   - An adaptive split, as in ARC: a returning block evicted from probation
//     says probation was too small, one evicted from the protected segment
//     says that was; each moves the protected target a little (capacity/3333
//     per return, scaled by how lopsided the ghosts are), starting at half.
//   - Chain order. A block goes right behind its parent when the parent is
//     in the same segment, not to the front. A request touches its blocks
//     first to last, so plain LRU leaves a chain's head least recent and
//     evicts it first, which turns the rest of the chain into dead weight: a
//     prefix hit stops at the first missing block. Here a block's
//     descendants always sit behind it, so a chain is cut from its tail and
//     what stays is still a usable prefix; a prefix shared by many chains
//     (a system prompt, a document) is touched by each of them and stays
//     ahead of all.
//
// A block whose parent is missing is not demoted: in a hierarchy the parent
// may live in another tier.
type Prefix[K comparable] struct {
	prob, prot list[K]
	nodes      map[K]*node[K]
	parents    map[K]K // parent of each tracked block that has one
	ghost      ghosts[K]
	ghostSize  [2]int64 // size of ghosts evicted from each segment
	target     int64    // target size of the protected segment
	protSize   int64
	capacity   int64
}

// Segments, in node.flags; a ghost keeps the segment it was evicted from.
const (
	prefixProbation = 0
	prefixProtected = 1
)

const (
	// prefixGhostFactor sizes the ghost memory against the capacity.
	prefixGhostFactor = 4
	// prefixStepDiv: a returning ghost moves the protected target by
	// capacity/prefixStepDiv (at least one block's size). Slow enough that
	// one burst does not swing the split, fast enough to settle within a
	// few capacities' worth of traffic.
	prefixStepDiv = 3333
)

var _ Policy[int] = (*Prefix[int])(nil)

// NewPrefix returns an empty prefix-aware policy for a cache of capacity,
// in the owner's size unit.
func NewPrefix[K comparable](capacity int64) *Prefix[K] {
	capacity = max(capacity, 1)
	p := &Prefix[K]{
		nodes:    make(map[K]*node[K]),
		parents:  make(map[K]K),
		ghost:    newGhosts[K](),
		target:   capacity / 2,
		capacity: capacity,
	}
	p.ghost.onTrim = func(n *node[K]) { p.ghostSize[n.flags] -= n.size }
	return p
}

// Add implements Policy.
func (p *Prefix[K]) Add(k K, info Info[K]) {
	if _, ok := p.nodes[k]; ok {
		panic("BUG: policy: Add of a tracked key")
	}
	size := max(info.Size, 1)
	n, returning := p.ghost.take(k)
	if returning {
		p.ghostSize[n.flags] -= n.size
		p.adapt(n.flags, size)
		n.freq++
	} else {
		n = &node[K]{key: k, freq: 1}
	}
	n.size = size
	p.nodes[k] = n
	if info.HasParent {
		p.parents[k] = info.Parent
	}
	p.place(n)
}

// adapt moves the protected target after a block evicted from segment seg
// came back: toward more room for that segment.
func (p *Prefix[K]) adapt(seg uint8, size int64) {
	step := max(size, p.capacity/prefixStepDiv)
	mine, other := p.ghostSize[seg], p.ghostSize[1-seg]
	if mine > 0 && other > mine {
		step = step * min(other/mine, 100) // ARC's weighting, bounded
	}
	if seg == prefixProtected {
		p.target = min(p.capacity, p.target+step)
	} else {
		p.target = max(0, p.target-step)
	}
}

// Access implements Policy.
func (p *Prefix[K]) Access(k K) {
	n, ok := p.nodes[k]
	if !ok {
		return
	}
	p.unlink(n)
	if n.freq < 1<<30 {
		n.freq++
	}
	p.place(n)
}

// Remove implements Policy.
func (p *Prefix[K]) Remove(k K) {
	if n, ok := p.nodes[k]; ok {
		p.unlink(n)
		delete(p.nodes, k)
		delete(p.parents, k)
	}
}

// Evict implements Policy: from the protected segment while it is over its
// target (or probation has nothing evictable), else from probation. The
// victim is remembered as a ghost.
func (p *Prefix[K]) Evict(evictable func(K) bool) (K, bool) {
	first, second := &p.prob, &p.prot
	if p.protSize > p.target {
		first, second = second, first
	}
	n := first.backmost(evictable)
	if n == nil {
		n = second.backmost(evictable)
	}
	if n == nil {
		var zero K
		return zero, false
	}
	p.unlink(n)
	delete(p.nodes, n.key)
	delete(p.parents, n.key)
	p.ghost.add(n)
	p.ghostSize[n.flags] += n.size
	p.ghost.trim(prefixGhostFactor * p.capacity)
	return n.key, true
}

// Len implements Policy.
func (p *Prefix[K]) Len() int { return len(p.nodes) }

// place puts n in its segment: right behind its parent when the parent is
// tracked in the same segment, else at the front.
func (p *Prefix[K]) place(n *node[K]) {
	l := &p.prob
	n.flags = prefixProbation
	if n.freq >= 2 {
		l = &p.prot
		n.flags = prefixProtected
		p.protSize += n.size
	}
	if pk, ok := p.parents[n.key]; ok {
		if pn, ok := p.nodes[pk]; ok && pn.flags == n.flags && pn != n {
			l.insertAfter(pn, n)
			return
		}
	}
	l.pushFront(n)
}

func (p *Prefix[K]) unlink(n *node[K]) {
	if n.flags == prefixProtected {
		p.prot.remove(n)
		p.protSize -= n.size
	} else {
		p.prob.remove(n)
	}
}
