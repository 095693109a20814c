// Package expiry is a min-heap of deadlines, for lazily expiring soft pins
// and TTLs: push (deadline, item) when something starts to expire, pop what is
// due when it matters. Stale entries (a deadline that was extended or removed)
// are the caller's to recognize and skip, which keeps updates O(log n) without
// an index into the heap.
package expiry

// Heap orders items by deadline. The zero value is empty and ready to use.
// It is not safe for concurrent use.
type Heap[T any] struct {
	items []entry[T]
}

type entry[T any] struct {
	at int64
	v  T
}

// Len returns the number of entries, stale ones included.
func (h *Heap[T]) Len() int { return len(h.items) }

// Push adds v with deadline at.
func (h *Heap[T]) Push(at int64, v T) {
	h.items = append(h.items, entry[T]{at, v})
	for i := len(h.items) - 1; i > 0; {
		p := (i - 1) / 2
		if h.items[p].at <= h.items[i].at {
			break
		}
		h.items[p], h.items[i] = h.items[i], h.items[p]
		i = p
	}
}

// PopDue removes and returns the earliest entry if its deadline is at or
// before now.
func (h *Heap[T]) PopDue(now int64) (v T, at int64, ok bool) {
	if len(h.items) == 0 || h.items[0].at > now {
		return v, 0, false
	}
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items[last] = entry[T]{}
	h.items = h.items[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.items) && h.items[l].at < h.items[m].at {
			m = l
		}
		if r < len(h.items) && h.items[r].at < h.items[m].at {
			m = r
		}
		if m == i {
			break
		}
		h.items[m], h.items[i] = h.items[i], h.items[m]
		i = m
	}
	return top.v, top.at, true
}

// Expire pops every entry due at now and calls fn with it, earliest first.
func (h *Heap[T]) Expire(now int64, fn func(v T, at int64)) {
	for {
		v, at, ok := h.PopDue(now)
		if !ok {
			return
		}
		fn(v, at)
	}
}
