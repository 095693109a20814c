package tcp

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/wire"
)

// Transport is the TCP transport. It is safe for concurrent use.
type Transport struct {
	opts  Options
	env   rdma.Env
	token []byte
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	// listen maps each configured NIC to the address it listens on (they
	// differ when the port is 0).
	listen  map[string]string
	lns     []net.Listener
	connSem chan struct{}
	srv     struct {
		sync.Mutex
		closed bool
		conns  map[net.Conn]struct{}
		byID   map[uint64]*serverConn // authenticated connections, for Fence
	}
	// session names this transport's outgoing connections to peers; a
	// Fence may only name connections of the same session.
	session uint64
	connIDs atomic.Uint64
	pool    *pool
	streams streamPool
	health  health
	nextID  atomic.Uint64
	rr      atomic.Uint64 // round-robin cursor over paths
	stats   counters
}

var _ rdma.Transport = (*Transport)(nil)

// New returns a transport; the engine starts it.
func New(opts Options) (*Transport, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	t := &Transport{opts: opts, listen: map[string]string{}, connSem: make(chan struct{}, opts.MaxConns)}
	t.ctx, t.stop = context.WithCancel(context.Background())
	t.srv.conns = map[net.Conn]struct{}{}
	t.srv.byID = map[uint64]*serverConn{}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	t.session = binary.LittleEndian.Uint64(b[:])
	t.pool = newPool(t)
	t.streams.idle = map[string][]*streamConn{}
	t.streams.busy = map[*streamConn]struct{}{}
	t.health.paths = map[rdma.Path]*pathState{}
	return t, nil
}

// Name returns "tcp".
func (t *Transport) Name() string { return "tcp" }

// Start listens on every NIC of the topology.
func (t *Transport) Start(env rdma.Env) error {
	if env.Segments == nil || env.Logger == nil {
		return fmt.Errorf("%w: incomplete environment", rdma.ErrInvalidRequest)
	}
	t.env, t.token = env, []byte(env.Token)
	for _, nic := range t.opts.Topology.All() {
		ln, err := net.Listen("tcp", nic)
		if err != nil {
			for _, ln := range t.lns {
				ln.Close()
			}
			return fmt.Errorf("tcp: listen on NIC %s: %w", nic, err)
		}
		t.lns = append(t.lns, ln)
		t.listen[nic] = ln.Addr().String()
	}
	for _, ln := range t.lns {
		t.wg.Go(func() { t.accept(ln) })
	}
	return nil
}

// Addr returns the listen address of the topology's first NIC.
func (t *Transport) Addr() string {
	if len(t.lns) == 0 {
		return ""
	}
	return t.lns[0].Addr().String()
}

// Addrs returns the listen address of every NIC, in topology order.
func (t *Transport) Addrs() []string {
	addrs := make([]string, len(t.lns))
	for i, ln := range t.lns {
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

// Close stops the listeners, closes every connection and waits for the
// transport's goroutines.
func (t *Transport) Close() error {
	t.stop()
	t.srv.Lock()
	t.srv.closed = true
	conns := t.srv.conns
	t.srv.conns = nil
	t.srv.Unlock()
	for _, ln := range t.lns {
		ln.Close()
	}
	for nc := range conns {
		nc.Close()
	}
	t.pool.close()
	t.streams.close()
	t.wg.Wait()
	return nil
}

// Stats counts what the transport did; tests and benchmarks read it.
type Stats struct {
	Slices     int64 // slices completed
	Retries    int64 // slices resubmitted after their path failed
	PathsDown  int64 // times a path was marked down
	Dials      int64 // outgoing connections made
	Evictions  int64 // pooled connections evicted by SIEVE
	BlocksSent int64 // blocks sent to peers that asked by key
	BlocksRead int64 // blocks read from peers by key
}

type counters struct {
	slices, retries, pathsDown, dials, evictions atomic.Int64
	blocksSent, blocksRead                       atomic.Int64
}

// Stats returns the counters so far.
func (t *Transport) Stats() Stats {
	return Stats{
		Slices:     t.stats.slices.Load(),
		Retries:    t.stats.retries.Load(),
		PathsDown:  t.stats.pathsDown.Load(),
		Dials:      t.stats.dials.Load(),
		Evictions:  t.stats.evictions.Load(),
		BlocksSent: t.stats.blocksSent.Load(),
		BlocksRead: t.stats.blocksRead.Load(),
	}
}

// remote is a segment opened on a peer.
type remote struct {
	peer string
	desc wire.Descriptor
	id   uint64
	// routes caches the paths to the segment per local location (a
	// *routes per string key); topology and descriptor never change.
	routes sync.Map
}

type routes struct {
	preferred, secondary []rdma.Path
}

func (t *Transport) routesTo(r *remote, location string) *routes {
	if v, ok := r.routes.Load(location); ok {
		return v.(*routes)
	}
	rt := &routes{}
	rt.preferred, rt.secondary = rdma.Routes(t.opts.Topology.For(location), rdma.NICs{Preferred: r.desc.Preferred, Secondary: r.desc.Secondary})
	v, _ := r.routes.LoadOrStore(location, rt)
	return v.(*routes)
}

func (r *remote) Desc() rdma.SegmentDesc {
	return rdma.SegmentDesc{Name: r.desc.Name, Location: r.desc.Location, Size: r.desc.Size}
}

func (r *remote) Close() error { return nil }

// Open asks peer for the segment's descriptor over a short-lived connection;
// transfers then use pooled connections along the paths it names.
func (t *Transport) Open(ctx context.Context, peer, name string) (rdma.Remote, error) {
	if t.ctx.Err() != nil {
		return nil, rdma.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.DialTimeout+t.opts.IOTimeout)
	defer cancel()
	nc, err := t.opts.Dial(ctx, "", peer)
	if err != nil {
		return nil, fmt.Errorf("tcp: dial %s: %w", peer, err)
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	br := bufio.NewReaderSize(nc, 4<<10)
	c, err := t.handshake(nc, br)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	version := c.Version
	if err := wire.WriteFrame(nc, wire.Header{Version: version, Type: wire.Open, ID: 1}, []byte(name)); err != nil {
		return nil, ctxErr(ctx, err)
	}
	h, err := wire.ReadHeader(br, make([]byte, wire.HeaderSize))
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("tcp: open: %w", err))
	}
	p, err := wire.ReadControl(br, h, wire.MaxControl)
	switch {
	case err != nil:
		return nil, ctxErr(ctx, err)
	case h.Type == wire.Error:
		return nil, wire.PeerError(h, p)
	case h.Type != wire.OpenOK || h.ID != 1 || h.Version != version:
		return nil, fmt.Errorf("%w: %s frame in answer to open", rdma.ErrProtocol, h.Type)
	}
	desc, err := wire.ParseDescriptor(p)
	if err != nil {
		return nil, err
	}
	if desc.Name != name {
		return nil, fmt.Errorf("%w: asked for segment %q, got %q", rdma.ErrProtocol, name, desc.Name)
	}
	if len(desc.Preferred) == 0 {
		desc.Preferred = []string{peer}
	}
	return &remote{peer: peer, desc: desc, id: h.Segment}, nil
}

// handshake authenticates to a peer.
func (t *Transport) handshake(nc net.Conn, br *bufio.Reader) (wire.Conn, error) {
	c, err := wire.ClientHello(nc, br, t.token, t.session)
	if err != nil {
		return wire.Conn{}, fmt.Errorf("tcp: %w", err)
	}
	return c, nil
}

// ctxErr prefers the context's error: a deadline that closed the connection
// is what went wrong, not the read that saw it.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return err
}

// health remembers which paths are down and until when. Only paths that
// failed have an entry; a success removes it, so the map stays as small as
// the set of broken paths.
type health struct {
	mu    sync.Mutex
	paths map[rdma.Path]*pathState
}

type pathState struct {
	failures  int
	downUntil time.Time
	err       error
}

// up reports whether p may be used now: never failed, or its backoff ran
// out (then the next use is the probe).
func (h *health) up(p rdma.Path, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps, ok := h.paths[p]
	return !ok || !now.Before(ps.downUntil)
}

func (h *health) lastErr(p rdma.Path) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ps, ok := h.paths[p]; ok {
		return ps.err
	}
	return nil
}

// down marks p down for a backoff that doubles with each failure in a row.
func (t *Transport) markDown(p rdma.Path, err error) {
	h := &t.health
	h.mu.Lock()
	ps, ok := h.paths[p]
	if !ok {
		ps = &pathState{}
		h.paths[p] = ps
	}
	ps.failures++
	backoff := t.opts.BackoffMax
	if shift := ps.failures - 1; shift < 30 {
		backoff = min(t.opts.BackoffMin<<shift, t.opts.BackoffMax)
	}
	ps.downUntil = time.Now().Add(backoff)
	ps.err = err
	h.mu.Unlock()
	t.stats.pathsDown.Add(1)
	t.env.Logger.Warn("transfer path down", "local", p.Local, "remote", p.Remote, "backoff", backoff, "err", err)
}

func (h *health) ok(p rdma.Path) {
	h.mu.Lock()
	if len(h.paths) > 0 {
		delete(h.paths, p)
	}
	h.mu.Unlock()
}
