package adapter

import (
	"context"
	"sync"
	"time"

	"github.com/yuebing/yuebing/client"
)

// shmPool holds the connector's shared-memory sessions with a node on the
// same host: one per load request or save batch in flight, opened on first
// use. A session that breaks (node gone, a call cut short) is closed and
// replaced on the next use; when a session cannot be opened (the node is on
// another host, or has shared memory off), the pool says so for a while and
// the callers use HTTP.
type shmPool struct {
	cl   *client.Client
	size int64
	// slots holds one entry per session allowed: nil for one not open yet.
	slots chan *client.Staging

	mu        sync.Mutex
	downUntil time.Time
	closed    bool
	open      map[*client.Staging]struct{}
}

// shmRetry is how long the pool uses HTTP after failing to open a session
// before it tries again.
const shmRetry = 10 * time.Second

func newShmPool(cl *client.Client, sessions int, size int64) *shmPool {
	p := &shmPool{cl: cl, size: size, slots: make(chan *client.Staging, sessions), open: map[*client.Staging]struct{}{}}
	for range sessions {
		p.slots <- nil
	}
	return p
}

// get returns a session, or nil when the caller should use HTTP. A non-nil
// session goes back with put.
func (p *shmPool) get(ctx context.Context) *client.Staging {
	p.mu.Lock()
	down := p.closed || time.Now().Before(p.downUntil)
	p.mu.Unlock()
	if down {
		return nil
	}
	// Every session busy (more loads at once than LoadDepth): this call
	// goes over HTTP rather than wait.
	var s *client.Staging
	select {
	case s = <-p.slots:
	default:
		return nil
	}
	if s != nil && !s.Broken() {
		return s
	}
	if s != nil {
		p.forget(s)
	}
	s, err := p.cl.OpenStaging(ctx, p.size)
	if err != nil {
		p.mu.Lock()
		p.downUntil = time.Now().Add(shmRetry)
		p.mu.Unlock()
		p.slots <- nil
		return nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		s.Close()
		p.slots <- nil
		return nil
	}
	p.open[s] = struct{}{}
	p.mu.Unlock()
	return s
}

// put gives a session back; a broken one is closed and its slot freed.
func (p *shmPool) put(s *client.Staging) {
	if s.Broken() {
		p.forget(s)
		s = nil
	}
	p.slots <- s
}

func (p *shmPool) forget(s *client.Staging) {
	s.Close()
	p.mu.Lock()
	delete(p.open, s)
	p.mu.Unlock()
}

// close ends every session; sessions in use end under their callers, whose
// calls then fail (and fall back to nothing: the connector is closing).
func (p *shmPool) close() {
	p.mu.Lock()
	p.closed = true
	open := p.open
	p.open = map[*client.Staging]struct{}{}
	p.mu.Unlock()
	for s := range open {
		s.Close()
	}
}
