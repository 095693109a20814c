package policy

// Classed orders blocks by class first, then by a policy of its own kind
// within each class: Evict takes a victim from the lowest class that has an
// evictable block. It is how retention classes (tier.Retention) rank
// eviction without every policy learning about them; each class's policy
// sees only its own blocks, so its order (recency, frequency, prefix
// position) is the order it would keep alone.
type Classed[K comparable] struct {
	classes []Policy[K]
	of      map[K]int
}

var _ Policy[int] = (*Classed[int])(nil)

// NewClassed returns a Classed policy of n classes (0 evicted first), each
// ordered by the named policy for a cache of the given capacity (see New).
func NewClassed[K comparable](name string, capacity int64, n int) (*Classed[K], error) {
	if n < 1 {
		n = 1
	}
	p := &Classed[K]{classes: make([]Policy[K], n), of: make(map[K]int)}
	for i := range p.classes {
		c, err := New[K](name, capacity)
		if err != nil {
			return nil, err
		}
		p.classes[i] = c
	}
	return p, nil
}

// class clamps a class to the ones p has: an out-of-range class is kept,
// not lost, at the nearest end.
func (p *Classed[K]) class(c int) int { return min(max(c, 0), len(p.classes)-1) }

// Add implements Policy; info.Class picks the block's class.
func (p *Classed[K]) Add(k K, info Info[K]) {
	if _, ok := p.of[k]; ok {
		panic("BUG: policy: Add of a tracked key")
	}
	c := p.class(info.Class)
	p.of[k] = c
	p.classes[c].Add(k, info)
}

// Access implements Policy.
func (p *Classed[K]) Access(k K) {
	if c, ok := p.of[k]; ok {
		p.classes[c].Access(k)
	}
}

// Remove implements Policy.
func (p *Classed[K]) Remove(k K) {
	if c, ok := p.of[k]; ok {
		delete(p.of, k)
		p.classes[c].Remove(k)
	}
}

// Evict implements Policy.
func (p *Classed[K]) Evict(evictable func(K) bool) (K, bool) {
	for _, c := range p.classes {
		if k, ok := c.Evict(evictable); ok {
			delete(p.of, k)
			return k, true
		}
	}
	var zero K
	return zero, false
}

// Len implements Policy.
func (p *Classed[K]) Len() int { return len(p.of) }

// ClassOf returns the class a tracked block is in.
func (p *Classed[K]) ClassOf(k K) (int, bool) {
	c, ok := p.of[k]
	return c, ok
}
