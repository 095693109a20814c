package hitrate

import (
	"fmt"
	"math"

	"github.com/yuebing/yuebing/bench"
)

// beladyCache is Belady's MIN on the per-block access stream of one trace:
// when a block must be inserted into a full cache, it evicts the cached block
// whose next use is farthest in the future (never used again counts as
// farthest). It follows the replay model exactly: every block of a request is
// inserted or touched, so there is no bypass.
//
// MIN is optimal for that stream: no policy keeps more of the accessed blocks
// present at the moment they are accessed (PresentHits). Replay counts only a
// request's leading present blocks, and MIN does not aim for that, so its
// prefix hit rate is a close, not a strict, bound: a policy can in principle
// beat it by at most PresentHits - HitBlocks. docs/policies.md says more.
//
// Next uses are known in advance: one backward pass over the trace gives, for
// each access, the position of the next access to the same block. Evictions
// pop a max-heap keyed by next use; an entry is stale, and skipped, once its
// block was evicted or used again.
type beladyCache struct {
	t        *bench.Trace
	next     []int32 // next[pos]: position of the next access to t.Access(pos)
	present  []bool
	nextOf   []int32 // nextOf[id]: next use of cached block id
	heap     nextHeap
	capacity int64
	used     int64
	pos      int32 // position of the next Touch in t.ids

	// PresentHits counts touches of blocks that were cached, in or out of
	// the leading prefix: the quantity MIN maximizes.
	PresentHits int64
}

var _ bench.ReplayCache = (*beladyCache)(nil)

// never is the next use of a block that is not accessed again.
const never = math.MaxInt32

func newBeladyCache(t *bench.Trace, capacity int64) (*beladyCache, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("%w: capacity of %d blocks; a cache needs at least one", bench.ErrOptions, capacity)
	}
	next := make([]int32, t.Accesses())
	last := make([]int32, t.Blocks())
	for i := range last {
		last[i] = never
	}
	for pos := t.Accesses() - 1; pos >= 0; pos-- {
		id := t.Access(pos)
		next[pos] = last[id]
		last[id] = int32(pos)
	}
	return &beladyCache{
		t:        t,
		next:     next,
		present:  make([]bool, t.Blocks()),
		nextOf:   make([]int32, t.Blocks()),
		capacity: capacity,
	}, nil
}

func (c *beladyCache) Contains(id int32) bool { return c.present[id] }

func (c *beladyCache) Touch(id, _ int32) {
	pos := c.pos
	if int(pos) >= c.t.Accesses() || c.t.Access(int(pos)) != id {
		panic(fmt.Sprintf("BUG: bench: Belady cache touched out of trace order at position %d", pos))
	}
	c.pos++
	if c.present[id] {
		c.PresentHits++
	} else {
		for c.used >= c.capacity {
			c.evict()
		}
		c.present[id] = true
		c.used++
	}
	c.nextOf[id] = c.next[pos]
	c.heap.push(heapEntry{next: c.next[pos], id: id})
}

func (c *beladyCache) evict() {
	for len(c.heap) > 0 {
		e := c.heap.pop()
		if c.present[e.id] && c.nextOf[e.id] == e.next {
			c.present[e.id] = false
			c.used--
			return
		}
	}
	panic("BUG: bench: Belady cache is full but its heap is empty")
}

type heapEntry struct{ next, id int32 }

// nextHeap is a max-heap on next use, written out rather than through
// container/heap, whose interface boxes every pushed value.
type nextHeap []heapEntry

// above orders by next use, farthest first; ties (blocks never used again)
// go to the higher id, so runs are deterministic.
func (h nextHeap) above(i, j int) bool {
	if h[i].next != h[j].next {
		return h[i].next > h[j].next
	}
	return h[i].id > h[j].id
}

func (h *nextHeap) push(e heapEntry) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.above(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *nextHeap) pop() heapEntry {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && s.above(l, m) {
			m = l
		}
		if r < n && s.above(r, m) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
