package policy

// ARC (Megiddo and Modha, FAST'03) balances recency and frequency: T1 holds
// blocks seen once recently, T2 blocks seen at least twice, and ghost lists
// B1 and B2 remember what each recently evicted. A returning B1 ghost says
// T1 was too small, a B2 ghost that T2 was, and the target size p of T1
// moves accordingly. Sizes here are in the owner's unit, so p, the lists and
// the ghost budgets are sizes, not counts.
//
// The owner evicts before it adds, so a ghost hit adapts p after the
// eviction that made its room rather than before; the difference is one
// eviction's worth of adaptation.
type ARC[K comparable] struct {
	t1, t2   list[K]
	t1s, t2s int64 // sizes of t1 and t2
	b1, b2   ghosts[K]
	nodes    map[K]*node[K]
	p        int64 // target size of t1
	capacity int64
}

// Membership in node.flags.
const arcInT2 = 1

var _ Policy[int] = (*ARC[int])(nil)

// NewARC returns an empty ARC policy for a cache of capacity, in the
// owner's size unit.
func NewARC[K comparable](capacity int64) *ARC[K] {
	return &ARC[K]{
		nodes:    make(map[K]*node[K]),
		b1:       newGhosts[K](),
		b2:       newGhosts[K](),
		capacity: max(capacity, 1),
	}
}

// Add implements Policy.
func (p *ARC[K]) Add(k K, info Info[K]) {
	if _, ok := p.nodes[k]; ok {
		panic("BUG: policy: Add of a tracked key")
	}
	size := max(info.Size, 1)
	if n, ok := p.b1.take(k); ok {
		// Weighted by how lopsided the ghosts are, as in the paper.
		p.p = min(p.capacity, p.p+size*max(1, p.b2.size/max(p.b1.size, 1)))
		p.pushT2(n, size)
	} else if n, ok := p.b2.take(k); ok {
		p.p = max(0, p.p-size*max(1, p.b1.size/max(p.b2.size, 1)))
		p.pushT2(n, size)
	} else {
		n := &node[K]{key: k, size: size}
		p.nodes[k] = n
		p.t1.pushFront(n)
		p.t1s += size
	}
	p.trimGhosts()
}

func (p *ARC[K]) pushT2(n *node[K], size int64) {
	n.size, n.flags = size, arcInT2
	p.nodes[n.key] = n
	p.t2.pushFront(n)
	p.t2s += size
}

// Access implements Policy.
func (p *ARC[K]) Access(k K) {
	n, ok := p.nodes[k]
	if !ok {
		return
	}
	if n.flags&arcInT2 != 0 {
		p.t2.moveToFront(n)
		return
	}
	p.t1.remove(n)
	p.t1s -= n.size
	p.pushT2(n, n.size)
}

// Remove implements Policy.
func (p *ARC[K]) Remove(k K) {
	if n, ok := p.nodes[k]; ok {
		p.unlink(n)
	}
}

// Evict implements Policy: from T1 while it is over its target p (or T2 is
// empty), else from T2; from the other list when the chosen one has only
// pinned blocks. The victim becomes a ghost of its list.
func (p *ARC[K]) Evict(evictable func(K) bool) (K, bool) {
	fromT1 := p.t1s > p.p || p.t2.len() == 0
	n := p.pick(fromT1, evictable)
	if n == nil {
		n = p.pick(!fromT1, evictable)
	}
	if n == nil {
		var zero K
		return zero, false
	}
	inT2 := n.flags&arcInT2 != 0
	p.unlink(n)
	if inT2 {
		p.b2.add(n)
	} else {
		p.b1.add(n)
	}
	p.trimGhosts()
	return n.key, true
}

// Len implements Policy.
func (p *ARC[K]) Len() int { return len(p.nodes) }

func (p *ARC[K]) pick(t1 bool, evictable func(K) bool) *node[K] {
	if t1 {
		return p.t1.backmost(evictable)
	}
	return p.t2.backmost(evictable)
}

func (p *ARC[K]) unlink(n *node[K]) {
	if n.flags&arcInT2 != 0 {
		p.t2.remove(n)
		p.t2s -= n.size
	} else {
		p.t1.remove(n)
		p.t1s -= n.size
	}
	delete(p.nodes, n.key)
}

// trimGhosts keeps ARC's bounds: T1 and B1 together within the capacity,
// all four lists within twice the capacity.
func (p *ARC[K]) trimGhosts() {
	p.b1.trim(max(p.capacity-p.t1s, 0))
	p.b2.trim(max(2*p.capacity-p.t1s-p.t2s-p.b1.size, 0))
}
