package tcp

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/yuebing/yuebing/internal/sieve"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/wire"
)

// pool keeps one connection per path, made on demand, at most MaxEndpoints
// of them, evicting by SIEVE. An evicted endpoint retires: it takes no new
// slices and closes when its last one is done.
type pool struct {
	t  *Transport
	mu struct {
		sync.Mutex
		closed  bool
		cache   *sieve.Cache[rdma.Path, *endpoint]
		dialing map[rdma.Path]*dialCall
		all     map[*endpoint]struct{}
	}
}

// dialCall lets concurrent users of a path share one dial.
type dialCall struct {
	done chan struct{}
	ep   *endpoint
	err  error
}

func newPool(t *Transport) *pool {
	p := &pool{t: t}
	p.mu.cache = sieve.New[rdma.Path, *endpoint](t.opts.MaxEndpoints)
	p.mu.dialing = map[rdma.Path]*dialCall{}
	p.mu.all = map[*endpoint]struct{}{}
	return p
}

// get returns a live endpoint for path, dialling one if needed.
func (p *pool) get(ctx context.Context, path rdma.Path) (*endpoint, error) {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil, rdma.ErrClosed
	}
	if ep, ok := p.mu.cache.Get(path); ok {
		p.mu.Unlock()
		return ep, nil
	}
	call, ok := p.mu.dialing[path]
	if !ok {
		call = &dialCall{done: make(chan struct{})}
		p.mu.dialing[path] = call
		// The dial is shared, so it must not die with the first caller's
		// context; it is bounded by DialTimeout and the transport instead.
		go p.dial(path, call)
	}
	p.mu.Unlock()
	select {
	case <-call.done:
		return call.ep, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pool) dial(path rdma.Path, call *dialCall) {
	ep, err := p.t.connect(path)
	p.mu.Lock()
	delete(p.mu.dialing, path)
	var evicted *endpoint
	if err == nil {
		if p.mu.closed {
			ep.nc.Close()
			ep, err = nil, rdma.ErrClosed
		} else {
			p.mu.all[ep] = struct{}{}
			p.t.wg.Go(ep.writeLoop)
			p.t.wg.Go(ep.readLoop)
			_, old, ok := p.mu.cache.Add(path, ep)
			if ok {
				evicted = old
			}
		}
	}
	p.mu.Unlock()
	if evicted != nil {
		p.t.stats.evictions.Add(1)
		evicted.retire()
	}
	if err != nil && p.t.ctx.Err() == nil {
		// Once per dial, however many callers wait on it.
		p.t.markDown(path, err)
	}
	call.ep, call.err = ep, err
	close(call.done)
}

// forget drops a failed or retired endpoint.
func (p *pool) forget(ep *endpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.mu.all, ep)
	if cur, ok := p.mu.cache.Peek(ep.path); ok && cur == ep {
		p.mu.cache.Remove(ep.path)
	}
}

func (p *pool) close() {
	p.mu.Lock()
	p.mu.closed = true
	eps := make([]*endpoint, 0, len(p.mu.all))
	for ep := range p.mu.all {
		eps = append(eps, ep)
	}
	dialing := make([]*dialCall, 0, len(p.mu.dialing))
	for _, c := range p.mu.dialing {
		dialing = append(dialing, c)
	}
	p.mu.Unlock()
	for _, ep := range eps {
		ep.fail(rdma.ErrClosed, false)
	}
	for _, c := range dialing {
		<-c.done
	}
}

// connect dials path and authenticates.
func (t *Transport) connect(path rdma.Path) (*endpoint, error) {
	nc, br, c, err := t.dialAuth(t.ctx, path.Local, path.Remote, 4<<10)
	if err != nil {
		return nil, err
	}
	ep := newEndpoint(t, path, nc, br, c.Version)
	ep.connID = c.ID
	return ep, nil
}

// dialAuth connects from local ("" for any) to remote within DialTimeout
// and authenticates, reading through a buffer of bufSize bytes.
func (t *Transport) dialAuth(ctx context.Context, local, remote string, bufSize int) (net.Conn, *bufio.Reader, wire.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.DialTimeout)
	defer cancel()
	nc, err := t.opts.Dial(ctx, local, remote)
	if err != nil {
		if local == "" {
			return nil, nil, wire.Conn{}, fmt.Errorf("tcp: dial %s: %w", remote, err)
		}
		return nil, nil, wire.Conn{}, fmt.Errorf("tcp: dial %s from %s: %w", remote, local, err)
	}
	t.stats.dials.Add(1)
	nc.SetDeadline(time.Now().Add(t.opts.DialTimeout))
	br := bufio.NewReaderSize(nc, bufSize)
	c, err := t.handshake(nc, br)
	if err != nil {
		nc.Close()
		return nil, nil, wire.Conn{}, err
	}
	nc.SetDeadline(time.Time{})
	return nc, br, c, nil
}
