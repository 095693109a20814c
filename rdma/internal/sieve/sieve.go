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
	if len(c.items) >= c.capacity {
		victim := c.evict()
		evictedKey, evicted, ok = victim.key, victim.val, true
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

func (c *Cache[K, V]) evict() *node[K, V] {
	n := c.hand
	if n == nil {
		n = c.tail
	}
	for n.visited {
		n.visited = false
		n = n.prev
		if n == nil {
			n = c.tail
		}
	}
	c.hand = n // unlink moves the hand on to the next newer entry
	c.unlink(n)
	return n
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
