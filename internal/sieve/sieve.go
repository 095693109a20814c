package sieve

type node[K comparable, V any] struct {
	key        K
	val        V
	visited    bool
	prev, next *node[K, V]
}

// Cache maps keys to values and holds at most its capacity of them.
type Cache[K comparable, V any] struct {
	capacity   int
	items      map[K]*node[K, V]
	head, tail *node[K, V] // head is the newest entry
	hand       *node[K, V]
}

// New returns an empty cache holding at most capacity entries (at least 1).
func New[K comparable, V any](capacity int) *Cache[K, V] {
	return &Cache[K, V]{capacity: max(capacity, 1), items: make(map[K]*node[K, V])}
}

// NewUnbounded returns an empty cache without a capacity, for an owner that
// evicts by its own measure (Evict).
func NewUnbounded[K comparable, V any]() *Cache[K, V] {
	return &Cache[K, V]{items: make(map[K]*node[K, V])}
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int { return len(c.items) }

// Get returns the value for k and marks it visited.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	n, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	n.visited = true
	return n.val, true
}

// Peek returns the value for k without marking it visited.
func (c *Cache[K, V]) Peek(k K) (V, bool) {
	n, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	return n.val, true
}

// Add inserts or replaces k. When the cache was full it evicts one entry
// and returns it.
func (c *Cache[K, V]) Add(k K, v V) (evictedKey K, evicted V, ok bool) {
	if n, found := c.items[k]; found {
		n.val = v
		n.visited = true
		return evictedKey, evicted, false
	}
	if c.capacity > 0 && len(c.items) >= c.capacity {
		evictedKey, evicted, ok = c.Evict(nil)
	}
	n := &node[K, V]{key: k, val: v, next: c.head}
	if c.head != nil {
		c.head.prev = n
	}
	c.head = n
	if c.tail == nil {
		c.tail = n
	}
	c.items[k] = n
	return evictedKey, evicted, ok
}

// Remove deletes k and reports whether it was there.
func (c *Cache[K, V]) Remove(k K) (V, bool) {
	n, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.unlink(n)
	return n.val, true
}

// Range calls f for every entry, newest first, until f returns false.
func (c *Cache[K, V]) Range(f func(K, V) bool) {
	for n := c.head; n != nil; n = n.next {
		if !f(n.key, n.val) {
			return
		}
	}
}

// Evict removes and returns the entry SIEVE chooses among those evictable
// accepts (nil accepts all): the hand sweeps from where it stopped toward
// newer entries, wrapping at the newest, clearing visited bits, and takes
// the first unvisited entry. Entries evictable refuses are passed over with
// their bit kept. Two sweeps suffice, the first clearing every bit it
// passes; ok is false when no entry is evictable.
func (c *Cache[K, V]) Evict(evictable func(K) bool) (k K, v V, ok bool) {
	n := c.hand
	for range 2*len(c.items) + 1 {
		if n == nil {
			n = c.tail
			if n == nil {
				break
			}
		}
		switch {
		case evictable != nil && !evictable(n.key):
			n = n.prev
		case n.visited:
			n.visited = false
			n = n.prev
		default:
			c.hand = n.prev
			c.unlink(n)
			return n.key, n.val, true
		}
	}
	c.hand = n
	return k, v, false
}

func (c *Cache[K, V]) unlink(n *node[K, V]) {
	if c.hand == n {
		c.hand = n.prev
	}
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		c.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		c.tail = n.prev
	}
	n.prev, n.next = nil, nil
	delete(c.items, n.key)
}
