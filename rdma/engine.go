package rdma

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Engine is the transfer service of one node: it holds the node's
// registered segments (served to peers by its transport), the remote
// segments it opened, and runs the requests of its batches on a fixed pool
// of workers. An Engine is safe for concurrent use.
type Engine struct {
	opts    Options
	tr      Transport
	reg     *Registry
	queue   chan *request
	ctx     context.Context
	cancel  context.CancelFunc
	workers sync.WaitGroup
	submits sync.WaitGroup
	blocks  blockSource
	mu      struct {
		sync.Mutex
		closed  bool
		batches int
		remotes map[*RemoteSegment]struct{}
	}
}

// New starts an engine on transport tr. The engine owns tr from now on and
// closes it in Close.
func New(opts Options, tr Transport) (*Engine, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if tr == nil {
		return nil, fmt.Errorf("%w: nil transport", ErrInvalidRequest)
	}
	e := &Engine{opts: opts, tr: tr, reg: NewRegistry(), queue: make(chan *request, opts.QueueDepth)}
	e.mu.remotes = map[*RemoteSegment]struct{}{}
	if err := tr.Start(Env{Segments: e.reg, Token: opts.ClusterToken, Logger: opts.Logger, Blocks: e.blocks.get}); err != nil {
		return nil, fmt.Errorf("rdma: starting %s transport: %w", tr.Name(), err)
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	for range opts.Workers {
		e.workers.Go(e.work)
	}
	return e, nil
}

// Addr returns the address peers pass to OpenSegment to reach this engine.
func (e *Engine) Addr() string { return e.tr.Addr() }

// Transport returns the engine's transport.
func (e *Engine) Transport() Transport { return e.tr }

// Register makes mem available to peers as segment name, with a location
// tag such as "cpu:0" that picks NICs from the topology. The engine does
// not copy mem; the caller keeps it alive and unchanged in size until
// Unregister returns.
func (e *Engine) Register(name, location string, mem []byte) (*Segment, error) {
	if e.isClosed() {
		return nil, ErrClosed
	}
	return e.reg.add(name, location, mem, nil)
}

// RegisterShared is Register for shared memory, which same-host peers can
// map directly (the shm transport needs it; the others accept it too).
func (e *Engine) RegisterShared(name, location string, m *SharedMemory) (*Segment, error) {
	if e.isClosed() {
		return nil, ErrClosed
	}
	if m == nil {
		return nil, fmt.Errorf("%w: nil shared memory", ErrInvalidRequest)
	}
	return e.reg.add(name, location, m.Bytes(), m)
}

// Unregister withdraws a segment. New requests and peer accesses are refused
// at once; Unregister then waits, honouring ctx, until the transfers that
// still use the memory are done. After it returns nil the memory is the
// caller's again. (Shared memory that a peer mapped stays mapped there: see
// the shm transport.)
func (e *Engine) Unregister(ctx context.Context, name string) error {
	return e.reg.remove(ctx, name)
}

// Segments returns the registry of local segments.
func (e *Engine) Segments() *Registry { return e.reg }

// OpenSegment opens the segment called name on peer (the peer engine's
// Addr). Close the returned handle when done with it.
func (e *Engine) OpenSegment(ctx context.Context, peer, name string) (*RemoteSegment, error) {
	if err := validName("segment name", name); err != nil {
		return nil, err
	}
	if e.isClosed() {
		return nil, ErrClosed
	}
	r, err := e.tr.Open(ctx, peer, name)
	if err != nil {
		return nil, fmt.Errorf("rdma: open %q on %s: %w", name, peer, err)
	}
	desc := r.Desc()
	if desc.Size == 0 {
		r.Close()
		return nil, fmt.Errorf("rdma: open %q on %s: %w: empty segment", name, peer, ErrProtocol)
	}
	s := &RemoteSegment{e: e, peer: peer, desc: desc, r: r}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		r.Close()
		return nil, ErrClosed
	}
	e.mu.remotes[s] = struct{}{}
	return s, nil
}

// AllocateBatch returns an empty batch with room for n requests.
func (e *Engine) AllocateBatch(n int) (*Batch, error) {
	if n <= 0 || n > e.opts.MaxBatchSize {
		return nil, fmt.Errorf("%w: batch size %d not in [1, %d]", ErrInvalidRequest, n, e.opts.MaxBatchSize)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		return nil, ErrClosed
	}
	if e.mu.batches >= e.opts.MaxBatches {
		return nil, fmt.Errorf("%w: %d allocated and not freed", ErrTooManyBatches, e.mu.batches)
	}
	e.mu.batches++
	return &Batch{e: e, capacity: n}, nil
}

func (e *Engine) freeBatch() {
	e.mu.Lock()
	e.mu.batches--
	e.mu.Unlock()
}

// Close fails the requests still running or queued, closes the remote
// segments and the transport, and waits for every goroutine. Local segments
// need no unregistering afterwards.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil
	}
	e.mu.closed = true
	e.mu.Unlock()

	e.cancel()
	e.submits.Wait()
	e.workers.Wait()
	for {
		select {
		case r := <-e.queue:
			r.finish(ErrClosed)
			continue
		default:
		}
		break
	}
	e.mu.Lock()
	remotes := e.mu.remotes
	e.mu.remotes = nil
	e.mu.Unlock()
	var errs []error
	for s := range remotes {
		errs = append(errs, s.close(context.Background()))
	}
	errs = append(errs, e.tr.Close())
	return errors.Join(errs...)
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.closed
}

// beginSubmit registers a submit in progress, so Close can wait for it.
func (e *Engine) beginSubmit() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		return false
	}
	e.submits.Add(1)
	return true
}

func (e *Engine) work() {
	for {
		select {
		case r := <-e.queue:
			e.run(r)
		case <-e.ctx.Done():
			return
		}
	}
}

func (e *Engine) run(r *request) {
	ctx, cancel := context.WithDeadline(r.ctx, r.deadline)
	defer cancel()
	stop := context.AfterFunc(e.ctx, cancel)
	defer stop()
	err := ctx.Err()
	if err == nil {
		err = e.tr.Transfer(ctx, &r.task)
	}
	if err != nil {
		switch {
		case e.ctx.Err() != nil:
			err = fmt.Errorf("%w: %w", ErrClosed, err)
		case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
			// The transport failed for its own reason while the deadline
			// passed; the deadline is what the caller asked about.
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
	}
	r.finish(err)
}

// newRequest validates q and pins both segments.
func (e *Engine) newRequest(b *Batch, q Request) (*request, error) {
	if q.Op != Read && q.Op != Write {
		return nil, fmt.Errorf("%w: unknown op %d", ErrInvalidRequest, q.Op)
	}
	if q.Local == nil || q.Remote == nil {
		return nil, fmt.Errorf("%w: nil segment", ErrInvalidRequest)
	}
	if q.Local.reg != e.reg || q.Remote.e != e {
		return nil, fmt.Errorf("%w: segment belongs to another engine", ErrInvalidRequest)
	}
	if err := CheckRange(q.Local.Size(), q.LocalOffset, q.Length); err != nil {
		return nil, fmt.Errorf("local segment %q: %w", q.Local.name, err)
	}
	if err := CheckRange(q.Remote.desc.Size, q.RemoteOffset, q.Length); err != nil {
		return nil, fmt.Errorf("remote segment %q: %w", q.Remote.desc.Name, err)
	}
	if !q.Local.pins.acquire() {
		return nil, fmt.Errorf("%w: local segment %q was unregistered", ErrSegmentNotFound, q.Local.name)
	}
	if !q.Remote.pins.acquire() {
		q.Local.pins.release()
		return nil, fmt.Errorf("%w: remote segment %q was closed", ErrClosed, q.Remote.desc.Name)
	}
	r := &request{b: b, local: q.Local, remote: q.Remote}
	r.task.Op = q.Op
	r.task.Local = q.Local.mem[q.LocalOffset : q.LocalOffset+q.Length : q.LocalOffset+q.Length]
	r.task.LocalLocation = q.Local.location
	r.task.Remote = q.Remote.r
	r.task.RemoteOffset = q.RemoteOffset
	return r, nil
}

// RemoteSegment is an opened segment of a peer. It is safe for concurrent
// use.
type RemoteSegment struct {
	e    *Engine
	peer string
	desc SegmentDesc
	r    Remote
	pins pins
	once sync.Once
	err  error
}

// Peer returns the address the segment was opened on.
func (s *RemoteSegment) Peer() string { return s.peer }

// Name returns the segment's name.
func (s *RemoteSegment) Name() string { return s.desc.Name }

// Location returns the segment's location tag on its owner.
func (s *RemoteSegment) Location() string { return s.desc.Location }

// Size returns the segment's length in bytes.
func (s *RemoteSegment) Size() uint64 { return s.desc.Size }

// Close refuses new requests on the segment, waits (honouring ctx) for those
// in flight, and releases the transport's handle.
func (s *RemoteSegment) Close(ctx context.Context) error {
	if err := s.close(ctx); err != nil {
		return err
	}
	e := s.e
	e.mu.Lock()
	if e.mu.remotes != nil {
		delete(e.mu.remotes, s)
	}
	e.mu.Unlock()
	return nil
}

func (s *RemoteSegment) close(ctx context.Context) error {
	if err := s.pins.close(ctx); err != nil {
		return fmt.Errorf("rdma: close remote segment %q: %w", s.desc.Name, err)
	}
	s.once.Do(func() { s.err = s.r.Close() })
	return s.err
}

func isDeadline(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout)
}
