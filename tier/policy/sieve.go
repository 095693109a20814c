package policy

import "github.com/yuebing/yuebing/internal/sieve"

// SIEVE (Zhang et al., NSDI'24) keeps blocks in insertion order with a
// visited bit. A hand sweeps from the oldest block toward the newest,
// clearing visited bits, and evicts the first unvisited block it meets; the
// hand stays where it stopped. Hits only set a bit, so a hit costs no list
// update, and blocks inserted once and never reused (scans) leave quickly.
//
// The algorithm is internal/sieve's, shared with the transports' endpoint
// pools; this is its Policy face.
type SIEVE[K comparable] struct {
	c *sieve.Cache[K, struct{}]
}

var _ Policy[int] = (*SIEVE[int])(nil)

// NewSIEVE returns an empty SIEVE policy.
func NewSIEVE[K comparable]() *SIEVE[K] {
	return &SIEVE[K]{c: sieve.NewUnbounded[K, struct{}]()}
}

// Add implements Policy.
func (p *SIEVE[K]) Add(k K, _ Info[K]) {
	if _, ok := p.c.Peek(k); ok {
		panic("BUG: policy: Add of a tracked key")
	}
	p.c.Add(k, struct{}{})
}

// Access implements Policy.
func (p *SIEVE[K]) Access(k K) { p.c.Get(k) }

// Remove implements Policy.
func (p *SIEVE[K]) Remove(k K) { p.c.Remove(k) }

// Evict implements Policy. Blocks that are not evictable are passed over
// like visited ones but keep their bit.
func (p *SIEVE[K]) Evict(evictable func(K) bool) (K, bool) {
	k, _, ok := p.c.Evict(evictable)
	return k, ok
}

// Len implements Policy.
func (p *SIEVE[K]) Len() int { return p.c.Len() }
