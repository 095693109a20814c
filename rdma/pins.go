package rdma

import (
	"context"
	"fmt"
	"sync"
)

// pins counts the users of a piece of memory so that it is only released
// once nobody touches it. Closing stops new pins and waits for the old ones.
type pins struct {
	mu struct {
		sync.Mutex
		n      int
		closed bool
		// drained is closed when n drops to zero after close.
		drained chan struct{}
	}
}

// acquire pins the memory unless it is closed.
func (p *pins) acquire() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return false
	}
	p.mu.n++
	return true
}

func (p *pins) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.n <= 0 {
		panic("BUG: rdma: pin released more often than acquired")
	}
	p.mu.n--
	if p.mu.n == 0 && p.mu.drained != nil {
		close(p.mu.drained)
		p.mu.drained = nil
	}
}

// close stops new pins and waits until the existing ones are released. A
// close that gives up (ctx done) leaves the memory closed; calling close
// again waits again.
func (p *pins) close(ctx context.Context) error {
	p.mu.Lock()
	p.mu.closed = true
	if p.mu.n == 0 {
		p.mu.Unlock()
		return nil
	}
	if p.mu.drained == nil {
		p.mu.drained = make(chan struct{})
	}
	ch, n := p.mu.drained, p.mu.n
	p.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %d transfers still use it: %w", ErrBusy, n, ctx.Err())
	}
}

func (p *pins) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.closed
}
