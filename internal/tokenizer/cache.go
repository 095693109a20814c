package tokenizer

import (
	"container/list"
	"sync"
)

// Key names cached token ids: a SHA-256 of what they encode.
type Key [32]byte

// SegmentCache is a least-recently-used cache of token ids bounded by the
// tokens it holds. It is safe for concurrent use; one mutex guards it,
// since a lookup is a map access and a list move (the encoding it saves
// costs thousands of times more).
type SegmentCache struct {
	maxTokens int
	mu        struct {
		sync.Mutex
		tokens int
		lru    *list.List // of *cached, most recent first
		byKey  map[Key]*list.Element
	}
}

type cached struct {
	key Key
	ids []uint32
}

// NewSegmentCache returns a cache holding at most maxTokens token ids;
// entries longer than an eighth of it are not kept, so one huge prompt
// cannot empty it. maxTokens 0 or less returns nil, a cache that holds
// nothing.
func NewSegmentCache(maxTokens int) *SegmentCache {
	if maxTokens <= 0 {
		return nil
	}
	c := &SegmentCache{maxTokens: maxTokens}
	c.mu.lru = list.New()
	c.mu.byKey = make(map[Key]*list.Element)
	return c
}

// Get returns the ids cached under k. The caller must not modify them.
func (c *SegmentCache) Get(k Key) ([]uint32, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.mu.byKey[k]
	if !ok {
		return nil, false
	}
	c.mu.lru.MoveToFront(el)
	return el.Value.(*cached).ids, true
}

// Add caches a copy of ids under k, evicting the least recently used
// entries past the bound.
func (c *SegmentCache) Add(k Key, ids []uint32) {
	if c == nil || len(ids) > c.maxTokens/8 {
		return
	}
	cp := append([]uint32(nil), ids...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.mu.byKey[k]; ok {
		c.mu.lru.MoveToFront(el)
		return
	}
	c.mu.byKey[k] = c.mu.lru.PushFront(&cached{key: k, ids: cp})
	c.mu.tokens += len(cp)
	for c.mu.tokens > c.maxTokens {
		el := c.mu.lru.Back()
		e := el.Value.(*cached)
		c.mu.lru.Remove(el)
		delete(c.mu.byKey, e.key)
		c.mu.tokens -= len(e.ids)
	}
}

// Len returns the entries and the tokens held.
func (c *SegmentCache) Len() (entries, tokens int) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.byKey), c.mu.tokens
}
