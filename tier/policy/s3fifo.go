package policy

// S3-FIFO (Yang et al., SOSP'23) splits the cache into a small probation
// queue (10% of capacity) and a main queue, both FIFO, plus a ghost queue of
// recently evicted keys. New blocks enter the small queue; one that is hit
// while there moves to the main queue when it reaches the end, the others
// leave and are remembered as ghosts. A block that returns while remembered
// goes straight to the main queue. The main queue is a CLOCK with a small
// counter (0-3) per block. Most blocks in caches are used once and S3-FIFO
// drops them after a short probation instead of a full trip through an LRU.
type S3FIFO[K comparable] struct {
	small, main list[K]
	nodes       map[K]*node[K]
	ghost       ghosts[K]
	// Sizes, in the owner's unit.
	smallSize, smallTarget, mainTarget int64
}

// Queue membership in node.flags.
const s3InMain = 1

// s3MaxFreq caps the hit counter: a block survives at most this many extra
// trips through the main queue without a hit (the paper's two bits).
const s3MaxFreq = 3

var _ Policy[int] = (*S3FIFO[int])(nil)

// NewS3FIFO returns an empty S3-FIFO policy for a cache of capacity (in the
// owner's size unit): a tenth for the small queue, the rest for the main
// queue, and ghosts up to the main queue's size.
func NewS3FIFO[K comparable](capacity int64) *S3FIFO[K] {
	small := max(capacity/10, 1)
	return &S3FIFO[K]{
		nodes:       make(map[K]*node[K]),
		ghost:       newGhosts[K](),
		smallTarget: small,
		mainTarget:  max(capacity-small, 1),
	}
}

// Add implements Policy.
func (p *S3FIFO[K]) Add(k K, info Info[K]) {
	if _, ok := p.nodes[k]; ok {
		panic("BUG: policy: Add of a tracked key")
	}
	n, wasGhost := p.ghost.take(k)
	if !wasGhost {
		n = &node[K]{key: k}
	}
	n.size = max(info.Size, 1)
	n.freq = 0
	p.nodes[k] = n
	if wasGhost {
		p.pushMain(n)
	} else {
		n.flags = 0
		p.small.pushFront(n)
		p.smallSize += n.size
	}
}

// Access implements Policy.
func (p *S3FIFO[K]) Access(k K) {
	if n, ok := p.nodes[k]; ok && n.freq < s3MaxFreq {
		n.freq++
	}
}

// Remove implements Policy.
func (p *S3FIFO[K]) Remove(k K) {
	if n, ok := p.nodes[k]; ok {
		p.unlink(n)
	}
}

// Evict implements Policy. It takes from the small queue while that holds
// its share, else from the main queue, falling back to the other queue when
// every block of the chosen one is pinned.
func (p *S3FIFO[K]) Evict(evictable func(K) bool) (K, bool) {
	var n *node[K]
	if p.smallSize >= p.smallTarget || p.main.len() == 0 {
		if n = p.evictSmall(evictable); n == nil {
			n = p.evictMain(evictable)
		}
	} else if n = p.evictMain(evictable); n == nil {
		n = p.evictSmall(evictable)
	}
	if n == nil {
		var zero K
		return zero, false
	}
	return n.key, true
}

// Len implements Policy.
func (p *S3FIFO[K]) Len() int { return len(p.nodes) }

// evictSmall walks the small queue from its oldest block: blocks hit during
// probation move to the main queue, the first one that was not is evicted
// and remembered as a ghost.
func (p *S3FIFO[K]) evictSmall(evictable func(K) bool) *node[K] {
	for n := p.small.back(); n != nil; {
		prev := n.prev
		switch {
		case !canEvict(evictable, n.key):
		case n.freq > 0:
			p.small.remove(n)
			p.smallSize -= n.size
			n.freq = 0
			p.pushMain(n)
		default:
			p.unlink(n)
			p.ghost.add(n)
			p.ghost.trim(p.mainTarget)
			return n
		}
		n = prev
	}
	return nil
}

// evictMain runs the main queue's CLOCK: a block with hits left is moved to
// the front with one fewer, the first without is evicted. A block needs at
// most s3MaxFreq+1 passes, which bounds the walk.
func (p *S3FIFO[K]) evictMain(evictable func(K) bool) *node[K] {
	n := p.main.back()
	for range (s3MaxFreq+1)*p.main.len() + 1 {
		if n == nil {
			if n = p.main.back(); n == nil {
				break
			}
		}
		prev := n.prev
		switch {
		case !canEvict(evictable, n.key):
		case n.freq > 0:
			n.freq--
			p.main.moveToFront(n)
		default:
			p.unlink(n)
			return n
		}
		n = prev
	}
	return nil
}

func (p *S3FIFO[K]) pushMain(n *node[K]) {
	n.flags = s3InMain
	p.main.pushFront(n)
}

func (p *S3FIFO[K]) unlink(n *node[K]) {
	if n.flags&s3InMain != 0 {
		p.main.remove(n)
	} else {
		p.small.remove(n)
		p.smallSize -= n.size
	}
	delete(p.nodes, n.key)
}
