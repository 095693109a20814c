package policy

// SIEVE (Zhang et al., NSDI'24) keeps blocks in insertion order with a
// visited bit. A hand sweeps from the oldest block toward the newest,
// clearing visited bits, and evicts the first unvisited block it meets; the
// hand stays where it stopped. Hits only set a bit, so a hit costs no list
// update, and blocks inserted once and never reused (scans) leave quickly.
type SIEVE[K comparable] struct {
	list  list[K]
	nodes map[K]*node[K]
	hand  *node[K] // next block to examine; nil starts at the back
}

// sieveVisited is the visited bit in node.flags.
const sieveVisited = 1

var _ Policy[int] = (*SIEVE[int])(nil)

// NewSIEVE returns an empty SIEVE policy.
func NewSIEVE[K comparable]() *SIEVE[K] {
	return &SIEVE[K]{nodes: make(map[K]*node[K])}
}

// Add implements Policy.
func (p *SIEVE[K]) Add(k K, _ Info[K]) {
	if _, ok := p.nodes[k]; ok {
		panic("BUG: policy: Add of a tracked key")
	}
	n := &node[K]{key: k}
	p.nodes[k] = n
	p.list.pushFront(n)
}

// Access implements Policy.
func (p *SIEVE[K]) Access(k K) {
	if n, ok := p.nodes[k]; ok {
		n.flags |= sieveVisited
	}
}

// Remove implements Policy.
func (p *SIEVE[K]) Remove(k K) {
	if n, ok := p.nodes[k]; ok {
		p.unlink(n)
	}
}

// Evict implements Policy. Blocks that are not evictable are passed over
// like visited ones but keep their bit. Two sweeps suffice: the first
// clears every bit it passes.
func (p *SIEVE[K]) Evict(evictable func(K) bool) (K, bool) {
	n := p.hand
	for range 2*p.list.len() + 1 {
		if n == nil {
			n = p.list.back()
			if n == nil {
				break
			}
		}
		switch {
		case !canEvict(evictable, n.key):
			n = n.prev
		case n.flags&sieveVisited != 0:
			n.flags &^= sieveVisited
			n = n.prev
		default:
			p.hand = n.prev
			p.unlink(n)
			return n.key, true
		}
	}
	p.hand = n
	var zero K
	return zero, false
}

// Len implements Policy.
func (p *SIEVE[K]) Len() int { return len(p.nodes) }

func (p *SIEVE[K]) unlink(n *node[K]) {
	if p.hand == n {
		p.hand = n.prev
	}
	p.list.remove(n)
	delete(p.nodes, n.key)
}
