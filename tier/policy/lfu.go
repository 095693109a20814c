package policy

import "math"

// LFU evicts the evictable block with the fewest hits since it was inserted,
// the least recently used among equals. It keeps no history of evicted
// blocks and never ages counts, which is what makes it a useful contrast:
// blocks that were hot once keep their place long after they cool.
//
// Blocks are grouped in buckets of equal count, kept in increasing count
// order, so every operation is O(1) but for skipping pinned blocks.
type LFU[K comparable] struct {
	nodes   map[K]*node[K]
	buckets map[int32]*lfuBucket[K]
	lowest  *lfuBucket[K] // bucket with the smallest count
}

type lfuBucket[K comparable] struct {
	freq       int32
	list       list[K] // front is most recent
	prev, next *lfuBucket[K]
}

var _ Policy[int] = (*LFU[int])(nil)

// NewLFU returns an empty LFU policy.
func NewLFU[K comparable]() *LFU[K] {
	return &LFU[K]{nodes: make(map[K]*node[K]), buckets: make(map[int32]*lfuBucket[K])}
}

// Add implements Policy.
func (p *LFU[K]) Add(k K, _ Info[K]) {
	if _, ok := p.nodes[k]; ok {
		panic("BUG: policy: Add of a tracked key")
	}
	n := &node[K]{key: k}
	p.nodes[k] = n
	p.bucketAfter(nil, 0).list.pushFront(n)
}

// Access implements Policy.
func (p *LFU[K]) Access(k K) {
	n, ok := p.nodes[k]
	if !ok {
		return
	}
	b := p.buckets[n.freq]
	if n.freq == math.MaxInt32 {
		b.list.moveToFront(n)
		return
	}
	n.freq++
	nb := p.bucketAfter(b, n.freq)
	b.list.remove(n)
	nb.list.pushFront(n)
	p.dropIfEmpty(b)
}

// Remove implements Policy.
func (p *LFU[K]) Remove(k K) {
	if n, ok := p.nodes[k]; ok {
		p.unlink(n)
	}
}

// Evict implements Policy.
func (p *LFU[K]) Evict(evictable func(K) bool) (K, bool) {
	for b := p.lowest; b != nil; b = b.next {
		if n := b.list.backmost(evictable); n != nil {
			p.unlink(n)
			return n.key, true
		}
	}
	var zero K
	return zero, false
}

// Len implements Policy.
func (p *LFU[K]) Len() int { return len(p.nodes) }

func (p *LFU[K]) unlink(n *node[K]) {
	b := p.buckets[n.freq]
	b.list.remove(n)
	delete(p.nodes, n.key)
	p.dropIfEmpty(b)
}

// bucketAfter returns the bucket for count freq, creating it right after
// prev (nil: at the start), where it belongs in count order.
func (p *LFU[K]) bucketAfter(prev *lfuBucket[K], freq int32) *lfuBucket[K] {
	if b, ok := p.buckets[freq]; ok {
		return b
	}
	b := &lfuBucket[K]{freq: freq, prev: prev}
	if prev == nil {
		b.next = p.lowest
		p.lowest = b
	} else {
		b.next = prev.next
		prev.next = b
	}
	if b.next != nil {
		b.next.prev = b
	}
	p.buckets[freq] = b
	return b
}

func (p *LFU[K]) dropIfEmpty(b *lfuBucket[K]) {
	if b.list.len() > 0 {
		return
	}
	if b.prev == nil {
		p.lowest = b.next
	} else {
		b.prev.next = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	}
	delete(p.buckets, b.freq)
}
