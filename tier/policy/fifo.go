package policy

// FIFO evicts the oldest evictable block; hits do not change the order. It
// is the simplest baseline and what S3-FIFO builds on. It is an LRU that
// ignores hits, so it reuses LRU's list.
type FIFO[K comparable] struct{ lru *LRU[K] }

var _ Policy[int] = (*FIFO[int])(nil)

// NewFIFO returns an empty FIFO policy.
func NewFIFO[K comparable]() *FIFO[K] { return &FIFO[K]{lru: NewLRU[K]()} }

// Add implements Policy.
func (p *FIFO[K]) Add(k K, info Info[K]) { p.lru.Add(k, info) }

// Access implements Policy; FIFO ignores hits.
func (p *FIFO[K]) Access(K) {}

// Remove implements Policy.
func (p *FIFO[K]) Remove(k K) { p.lru.Remove(k) }

// Evict implements Policy.
func (p *FIFO[K]) Evict(evictable func(K) bool) (K, bool) { return p.lru.Evict(evictable) }

// Len implements Policy.
func (p *FIFO[K]) Len() int { return p.lru.Len() }
