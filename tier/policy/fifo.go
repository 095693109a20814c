package policy

// FIFO evicts the oldest evictable block; hits do not change the order. It
// is the simplest baseline and what S3-FIFO builds on.
type FIFO[K comparable] struct {
	list  list[K]
	nodes map[K]*node[K]
}

var _ Policy[int] = (*FIFO[int])(nil)

// NewFIFO returns an empty FIFO policy.
func NewFIFO[K comparable]() *FIFO[K] {
	return &FIFO[K]{nodes: make(map[K]*node[K])}
}

// Add implements Policy.
func (p *FIFO[K]) Add(k K, _ Info[K]) {
	if _, ok := p.nodes[k]; ok {
		panic("BUG: policy: Add of a tracked key")
	}
	n := &node[K]{key: k}
	p.nodes[k] = n
	p.list.pushFront(n)
}

// Access implements Policy; FIFO ignores hits.
func (p *FIFO[K]) Access(K) {}

// Remove implements Policy.
func (p *FIFO[K]) Remove(k K) {
	if n, ok := p.nodes[k]; ok {
		p.list.remove(n)
		delete(p.nodes, k)
	}
}

// Evict implements Policy.
func (p *FIFO[K]) Evict(evictable func(K) bool) (K, bool) {
	if n := p.list.backmost(evictable); n != nil {
		p.list.remove(n)
		delete(p.nodes, n.key)
		return n.key, true
	}
	var zero K
	return zero, false
}

// Len implements Policy.
func (p *FIFO[K]) Len() int { return len(p.nodes) }
