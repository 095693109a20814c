package tcp

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/wire"
)

// errRetired ends an endpoint the pool evicted, once its slices drained.
var errRetired = errors.New("tcp: endpoint retired")

// errAborted ends an endpoint because a cancelled slice was mid-flight on
// it: closing the socket is the only way to stop the kernel copying into or
// out of memory the caller is about to get back.
var errAborted = errors.New("tcp: connection aborted to cancel a slice")

// Slice writer states. The writer may only touch a slice it moved from
// queued to sending; a canceller that moves it from queued to done keeps the
// writer away from it.
const (
	wQueued int32 = iota
	wSending
	wDone
)

// slice is one frame's worth of a request on one endpoint. Two parties hold
// it, the writer (which sends the request frame) and the reader (which
// receives the answer); refs counts them, and the last to let go hands the
// slice back to its request. After that nobody on this endpoint touches
// buf.
type slice struct {
	id    uint64
	op    rdma.Op
	seg   uint64
	off   uint64 // in the remote segment
	buf   []byte
	start uint64 // offset in the request, for resubmission
	// fences are the server's ids of connections an earlier attempt of
	// this Write went out on; they are fenced before it is sent again.
	fences []uint64
	ep     *endpoint
	res    chan<- *slice
	wstate atomic.Int32
	refs   atomic.Int32
	// werr is written only by the writer side's owner, rerr only by the
	// reader side's, each before its refs decrement.
	werr, rerr error
}

func (s *slice) release() {
	if s.refs.Add(-1) == 0 {
		s.ep.releaseSlot()
		s.res <- s
	}
}

func (s *slice) err() error {
	if s.rerr != nil {
		return s.rerr
	}
	return s.werr
}

// endpoint is one pooled connection along one path, with a writer and a
// reader goroutine. Slices are pipelined: up to Depth wait on it at once.
type endpoint struct {
	t       *Transport
	path    rdma.Path
	nc      net.Conn
	br      *bufio.Reader
	version uint8
	connID  uint64 // the server's name for this connection
	sendq   chan *slice
	slots   chan struct{}
	done    chan struct{}
	proven  atomic.Bool
	mu      struct {
		sync.Mutex
		pending   map[uint64]*slice
		receiving *slice
		err       error
		retiring  bool
	}
}

func newEndpoint(t *Transport, path rdma.Path, nc net.Conn, br *bufio.Reader, version uint8) *endpoint {
	e := &endpoint{
		t: t, path: path, nc: nc, br: br, version: version,
		sendq: make(chan *slice, t.opts.Depth),
		slots: make(chan struct{}, t.opts.Depth),
		done:  make(chan struct{}),
	}
	e.mu.pending = make(map[uint64]*slice, t.opts.Depth)
	return e
}

// submit queues s, waiting for a free slot. It fails when the endpoint is
// broken or retired; the caller then picks another.
func (e *endpoint) submit(s *slice, cancel <-chan struct{}) error {
	select {
	case e.slots <- struct{}{}:
	case <-cancel:
		return errCancelled
	case <-e.done:
		return e.failure()
	}
	e.mu.Lock()
	if err := e.mu.err; err != nil || e.mu.retiring {
		e.mu.Unlock()
		e.releaseSlot()
		if err == nil {
			err = errRetired
		}
		return err
	}
	s.ep = e
	s.refs.Store(2)
	e.mu.pending[s.id] = s
	e.sendq <- s // never blocks: sendq has as many places as there are slots
	e.mu.Unlock()
	return nil
}

var errCancelled = errors.New("tcp: cancelled")

// prove reports true for the first slice that succeeds on a live endpoint:
// that is when its path counts as healthy again. Later successes, and
// successes that arrive after the endpoint failed, say nothing new.
func (e *endpoint) prove() bool {
	if e.proven.Load() || !e.proven.CompareAndSwap(false, true) {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.err == nil
}

func (e *endpoint) failure() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.err == nil {
		return errRetired
	}
	return e.mu.err
}

func (e *endpoint) releaseSlot() {
	<-e.slots
	e.mu.Lock()
	idle := e.mu.retiring && e.mu.err == nil && len(e.slots) == 0
	e.mu.Unlock()
	if idle {
		e.fail(errRetired, false)
	}
}

// retire stops new slices; the endpoint closes once its slices are done.
func (e *endpoint) retire() {
	e.mu.Lock()
	e.mu.retiring = true
	idle := e.mu.err == nil && len(e.slots) == 0
	e.mu.Unlock()
	if idle {
		e.fail(errRetired, false)
	}
}

// fail ends the endpoint: it closes the socket, hands every waiting slice
// back with err, and, when the path itself broke, marks it down.
func (e *endpoint) fail(err error, broken bool) {
	e.mu.Lock()
	if e.mu.err != nil {
		e.mu.Unlock()
		return
	}
	e.mu.err = err
	pending := e.mu.pending
	e.mu.pending = nil
	e.mu.Unlock()
	// Out of the pool and the path marked first, so that nobody who sees
	// done closed can be handed this endpoint or path again.
	e.t.pool.forget(e)
	if broken {
		e.t.markDown(e.path, err)
	}
	close(e.done)
	e.nc.Close()
	for _, s := range pending {
		s.rerr = err
		s.release()
	}
	// Submit no longer queues (mu.err is set), so this drains for good.
	for {
		select {
		case s := <-e.sendq:
			if s.wstate.CompareAndSwap(wQueued, wDone) {
				s.werr = err
				s.release()
			}
		default:
			return
		}
	}
}

// cancel takes s back before its answer came. Whatever part of s is not
// busy is released at once; if the kernel is moving s's bytes right now the
// connection is closed, which stops it promptly.
func (e *endpoint) cancel(s *slice, err error) {
	if s.wstate.CompareAndSwap(wQueued, wDone) {
		s.werr = err
		s.release()
	} else if s.wstate.Load() == wSending {
		e.fail(errAborted, false)
	}
	e.mu.Lock()
	_, waiting := e.mu.pending[s.id]
	if waiting {
		delete(e.mu.pending, s.id)
	}
	busy := e.mu.receiving == s
	e.mu.Unlock()
	if waiting {
		s.rerr = err
		s.release()
	} else if busy {
		e.fail(errAborted, false)
	}
}

func (e *endpoint) writeLoop() {
	var hdr [wire.HeaderSize]byte
	// Read requests are only headers: those queued together go out in one
	// write, so small slices do not cost a system call each on both ends.
	reads := make([]*slice, 0, e.t.opts.Depth)
	buf := make([]byte, 0, e.t.opts.Depth*wire.HeaderSize)
	var next *slice
	for {
		s := next
		next = nil
		if s == nil {
			select {
			case s = <-e.sendq:
			case <-e.done:
				return
			}
		}
		if !s.wstate.CompareAndSwap(wQueued, wSending) {
			continue // cancelled; the canceller released the writer's part
		}
		if s.op == rdma.Write {
			e.finishSend(s, e.send(s, hdr[:]))
			continue
		}
		reads = append(reads[:0], s)
	more:
		for len(reads) < cap(reads) {
			select {
			case q := <-e.sendq:
				if q.op != rdma.Read {
					next = q
					break more
				}
				if q.wstate.CompareAndSwap(wQueued, wSending) {
					reads = append(reads, q)
				}
			default:
				break more
			}
		}
		buf = buf[:0]
		for _, q := range reads {
			buf = e.appendRequest(buf, q)
		}
		e.nc.SetWriteDeadline(time.Now().Add(e.t.opts.IOTimeout))
		_, err := e.nc.Write(buf)
		for _, q := range reads {
			e.finishSend(q, err)
		}
	}
}

// finishSend ends the writer's part of s.
func (e *endpoint) finishSend(s *slice, err error) {
	s.wstate.Store(wDone)
	if err != nil {
		s.werr = err
		e.fail(fmt.Errorf("tcp: send to %s: %w", e.path.Remote, err), true)
	}
	s.release()
}

func (e *endpoint) appendRequest(buf []byte, s *slice) []byte {
	h := wire.Header{Version: e.version, Type: wire.Read, ID: s.id, Segment: s.seg, Offset: s.off, Length: uint32(len(s.buf))}
	n := len(buf)
	buf = buf[:n+wire.HeaderSize]
	h.Put(buf[n:])
	return buf
}

// send writes a Write slice: fences for its earlier attempts, then header,
// payload, trailer.
func (e *endpoint) send(s *slice, hdr []byte) error {
	e.nc.SetWriteDeadline(time.Now().Add(e.t.opts.IOTimeout))
	if len(s.fences) > 0 {
		buf := make([]byte, 0, len(s.fences)*wire.HeaderSize)
		for _, id := range s.fences {
			f := wire.Header{Version: e.version, Type: wire.Fence, ID: s.id, Segment: id}
			buf = buf[:len(buf)+wire.HeaderSize]
			f.Put(buf[len(buf)-wire.HeaderSize:])
		}
		if _, err := e.nc.Write(buf); err != nil {
			return err
		}
	}
	h := wire.Header{Version: e.version, Type: wire.Write, ID: s.id, Segment: s.seg, Offset: s.off, Length: uint32(len(s.buf))}
	return wire.WriteData(e.nc, h, s.buf)
}

func (e *endpoint) readLoop() {
	var hdr [wire.HeaderSize]byte
	for {
		h, err := wire.ReadHeader(e.br, hdr[:])
		if err == nil && h.Version != e.version {
			err = fmt.Errorf("%w: frame version %d, agreed %d", rdma.ErrProtocol, h.Version, e.version)
		}
		if err != nil {
			e.fail(fmt.Errorf("tcp: receive from %s: %w", e.path.Remote, err), true)
			return
		}
		e.mu.Lock()
		s := e.mu.pending[h.ID]
		if s != nil {
			delete(e.mu.pending, h.ID)
			e.mu.receiving = s
		}
		e.mu.Unlock()
		sliceErr, connErr := e.receive(h, s)
		if s != nil {
			e.mu.Lock()
			e.mu.receiving = nil
			e.mu.Unlock()
			s.rerr = sliceErr
			s.release()
		}
		if connErr != nil {
			e.fail(fmt.Errorf("tcp: receive from %s: %w", e.path.Remote, connErr), true)
			return
		}
	}
}

// receive handles one answer frame for s (nil when nobody waits for it any
// more). It reads a data payload straight into s.buf after checking that it
// is exactly the range s asked for, so a lying peer cannot write anywhere
// else.
func (e *endpoint) receive(h wire.Header, s *slice) (sliceErr, connErr error) {
	protocol := func(format string, args ...any) (error, error) {
		err := fmt.Errorf("%w: "+format, append([]any{rdma.ErrProtocol}, args...)...)
		return err, err
	}
	switch h.Type {
	case wire.Error:
		msg, err := wire.ReadControl(e.br, h, wire.MaxMessage)
		if err != nil {
			return err, err
		}
		perr := wire.PeerError(h, msg)
		if h.ID == 0 {
			return perr, perr
		}
		if s == nil {
			return nil, nil
		}
		if errors.Is(perr, rdma.ErrChecksum) || errors.Is(perr, rdma.ErrProtocol) {
			// The path mangled our bytes, or we disagree about framing:
			// the connection is not to be trusted any more.
			return perr, perr
		}
		return perr, nil
	case wire.WriteOK:
		if h.Length != 0 || (s != nil && s.op != rdma.Write) {
			return protocol("unexpected write-ok for request %d", h.ID)
		}
		return nil, nil
	case wire.ReadData:
		if int64(h.Length) > int64(e.t.opts.MaxSliceSize) {
			return protocol("read-data of %d bytes, limit %d", h.Length, e.t.opts.MaxSliceSize)
		}
		e.nc.SetReadDeadline(time.Now().Add(e.t.opts.IOTimeout))
		defer e.nc.SetReadDeadline(time.Time{})
		if s == nil {
			// Its request was cancelled; skip the bytes.
			if err := wire.SkipData(e.br, h); err != nil {
				return err, err
			}
			return nil, nil
		}
		if s.op != rdma.Read || int(h.Length) != len(s.buf) || h.Segment != s.seg || h.Offset != s.off {
			return protocol("read-data %d bytes at %d of %#x does not answer request %d", h.Length, h.Offset, h.Segment, h.ID)
		}
		if err := wire.RecvData(e.br, h, s.buf); err != nil {
			// A bad checksum leaves the stream in step, but a path that
			// mangles bytes is not one to keep using.
			return err, err
		}
		return nil, nil
	}
	return protocol("unexpected %s frame", h.Type)
}
