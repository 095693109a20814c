package rdmatest

import (
	"context"
	"sync"

	"github.com/yuebing/yuebing/rdma"
)

// Gate wraps a real transport and can hold its transfers back, so tests can
// observe requests that are pending for as long as they need: no sleeps, no
// races with a fast loopback. Closed, it holds every Transfer until it
// is released or the transfer's context ends; released (the default), it passes
// straight through.
type Gate struct {
	rdma.Transport
	mu   sync.Mutex
	open chan struct{}
}

// NewGate wraps tr, open.
func NewGate(tr rdma.Transport) *Gate {
	g := &Gate{Transport: tr, open: make(chan struct{})}
	close(g.open)
	return g
}

// Hold holds transfers that start from now on.
func (g *Gate) Hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

// Release lets held and new transfers through.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// Transfer waits for the gate, then transfers.
func (g *Gate) Transfer(ctx context.Context, task *rdma.Task) error {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Transport.Transfer(ctx, task)
}
