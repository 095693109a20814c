package policy

// LRU evicts the least recently used evictable block.
type LRU[K comparable] struct {
	list  list[K]
	nodes map[K]*node[K]
}

var _ Policy[int] = (*LRU[int])(nil)

// NewLRU returns an empty LRU policy.
func NewLRU[K comparable]() *LRU[K] {
	return &LRU[K]{nodes: make(map[K]*node[K])}
}

// Add implements Policy.
func (p *LRU[K]) Add(k K, _ Info[K]) {
	if _, ok := p.nodes[k]; ok {
		panic("BUG: policy: Add of a tracked key")
	}
	n := &node[K]{key: k}
	p.nodes[k] = n
	p.list.pushFront(n)
}

// Access implements Policy.
func (p *LRU[K]) Access(k K) {
	if n, ok := p.nodes[k]; ok {
		p.list.moveToFront(n)
	}
}

// Remove implements Policy.
func (p *LRU[K]) Remove(k K) {
	if n, ok := p.nodes[k]; ok {
		p.list.remove(n)
		delete(p.nodes, k)
	}
}

// Evict implements Policy. Blocks that are not evictable are skipped and keep
// their place: pins are short-lived, and their order still reflects use.
func (p *LRU[K]) Evict(evictable func(K) bool) (K, bool) {
	if n := p.list.backmost(evictable); n != nil {
		p.list.remove(n)
		delete(p.nodes, n.key)
		return n.key, true
	}
	var zero K
	return zero, false
}

// Len implements Policy.
func (p *LRU[K]) Len() int { return len(p.nodes) }
