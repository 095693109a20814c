package adapter

import (
	"fmt"
	"sync"
)

// PageSet is the page bookkeeping every Device needs: which of its pages
// are handed out. Alloc hands out low pages first and takes nothing when it
// cannot take all; freeing a page that is not allocated is a bug and
// panics. It is safe for concurrent use.
type PageSet struct {
	mu    sync.Mutex
	free  []Page // a stack: the next page to hand out is last
	inUse []bool
}

// NewPageSet returns the bookkeeping of n pages, all free.
func NewPageSet(n int) *PageSet {
	s := &PageSet{free: make([]Page, n), inUse: make([]bool, n)}
	for i := range n {
		s.free[i] = Page(n - 1 - i)
	}
	return s
}

// Alloc hands out n pages, or fails with ErrDeviceFull and hands out none.
func (s *PageSet) Alloc(n int) ([]Page, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: alloc %d pages", ErrInvalid, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > len(s.free) {
		return nil, fmt.Errorf("%w: %d pages wanted, %d free", ErrDeviceFull, n, len(s.free))
	}
	out := make([]Page, n)
	for i := range n {
		out[i] = s.free[len(s.free)-1-i]
		s.inUse[out[i]] = true
	}
	s.free = s.free[:len(s.free)-n]
	return out, nil
}

// Free returns pages; who names the device in the panic of a bad free.
func (s *PageSet) Free(who string, pages ...Page) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range pages {
		if p < 0 || int(p) >= len(s.inUse) || !s.inUse[p] {
			panic(fmt.Sprintf("BUG: %s: freeing page %d that is not allocated", who, p))
		}
		s.inUse[p] = false
		s.free = append(s.free, p)
	}
}

// Allocated reports whether p is handed out.
func (s *PageSet) Allocated(p Page) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return p >= 0 && int(p) < len(s.inUse) && s.inUse[p]
}

// Available is how many pages are free.
func (s *PageSet) Available() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.free)
}
