package staging

import (
	"bufio"
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/rdma"
)

// maxHello bounds the request line: a token and a size fit in far less.
const maxHello = 4 << 10

// Server hands out staging segments over a unix socket. It is safe for
// concurrent use.
type Server struct {
	opts Options
	ln   *net.UnixListener
	wg   sync.WaitGroup

	// ctx ends when the server closes: requests in flight stop.
	ctx    context.Context
	cancel context.CancelFunc

	accepted, pendingClosed, helloTimeouts, acceptErrors, quotaRefusals atomic.Int64

	mu struct {
		sync.Mutex
		sessions map[string]*Session
		conns    map[*net.UnixConn]struct{}
		// pending holds the connections whose request has not arrived,
		// oldest first (*pendingConn).
		pending *list.List
		// open and used count the sessions and bytes reserved, sessions
		// being created included, so concurrent requests cannot pass a
		// limit together.
		open   int
		used   int64
		owners map[string]*ownerUse
		// mapped is the bytes of the regions' mappings (one per file,
		// however many sessions registered it).
		mapped int64
		// mappings are the clients' memfds mapped, by file (region.go).
		mappings map[mapKey]*mapping
		closed   bool
	}
}

// pendingConn is a connection waiting for its request.
type pendingConn struct {
	c *net.UnixConn
	// closed is set, under Server.mu, when a newer connection took its
	// slot; its read deadline is then in the past.
	closed bool
}

// ownerUse is what one owner's sessions hold.
type ownerUse struct {
	sessions int
	bytes    int64
}

// Session is one client's staging segment.
type Session struct {
	id, owner string
	size      int64
	// Value is what Options.Authenticate returned with the owner.
	Value any
	mem   *rdma.SharedMemory
	// mu is held shared while a request copies into or out of the
	// segment, and exclusively to free it: a segment is never unmapped
	// under a copy.
	mu     sync.RWMutex
	closed bool
	// regions are the client's registered buffers (region.go), changed
	// under mu held exclusively; regionCount is guarded by Server.mu.
	regions     map[uint32]*region
	nextRegion  uint32
	regionCount int
}

// ID returns the session's ID.
func (s *Session) ID() string { return s.id }

// Bytes returns the segment; valid while the session is acquired.
func (s *Session) Bytes() []byte { return s.mem.Bytes() }

// New validates opts and binds the socket; Serve accepts on it.
func New(opts Options) (*Server, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: opts.Listen, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("staging: listen %s: %w", opts.Listen, err)
	}
	s := &Server{opts: opts, ln: ln}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.sessions = map[string]*Session{}
	s.mu.conns = map[*net.UnixConn]struct{}{}
	s.mu.pending = list.New()
	s.mu.owners = map[string]*ownerUse{}
	return s, nil
}

// Listener returns the bound socket, for reporting its address; Serve
// accepts on it.
func (s *Server) Listener() net.Listener { return s.ln }

// Addr returns the socket's name as clients dial it ("@name" for an
// abstract socket).
func (s *Server) Addr() string { return s.opts.Listen }

// Serve accepts clients until Close; it returns nil after Close. A failed
// accept is retried after a pause, as net/http does: out of descriptors
// (EMFILE, ENFILE) the process recovers once connections close, and
// returning would leave the socket unserved for good. Only an error that
// no retry can mend (the socket closed under it) is returned.
func (s *Server) Serve() error {
	var pause time.Duration
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("staging: accept: %w", err)
			}
			s.acceptErrors.Add(1)
			// 5 ms doubling to 1 s: quick to recover, and at most one
			// retry (and log line) a second while the condition lasts.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.opts.Logger.Warn("staging: accept failed; retrying", "err", err, "retry_in", pause)
			select {
			case <-time.After(pause):
			case <-s.ctx.Done():
			}
			continue
		}
		pause = 0
		s.accepted.Add(1)
		// The deadline is set here, before the connection can be
		// closed to make room (which moves it to the past).
		c.SetReadDeadline(time.Now().Add(s.opts.HelloTimeout))
		p := &pendingConn{c: c}
		var evict *pendingConn
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.mu.conns[c] = struct{}{}
		el := s.mu.pending.PushBack(p)
		if s.mu.pending.Len() > s.opts.MaxPending {
			evict = s.mu.pending.Remove(s.mu.pending.Front()).(*pendingConn)
			evict.closed = true
		}
		s.mu.Unlock()
		if evict != nil {
			// Its goroutine, woken by the deadline, answers and hangs
			// up: one writer per connection.
			evict.c.SetReadDeadline(time.Unix(1, 0))
		}
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.mu.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.handle(p, el)
		})
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}

type hello struct {
	Token string `json:"token"`
	Size  int64  `json:"size"`
}

type answer struct {
	Session string       `json:"session,omitempty"`
	Size    int64        `json:"size,omitempty"`
	Error   *answerError `json:"error,omitempty"`
}

type answerError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// handle runs one client: its request, the answer with the descriptor,
// then waits for the client to hang up and frees the session.
func (s *Server) handle(p *pendingConn, el *list.Element) {
	c := p.c
	h, err := readHello(c, int64(s.opts.MaxSessionBytes))
	s.mu.Lock()
	closed := p.closed
	if !closed {
		s.mu.pending.Remove(el)
	}
	s.mu.Unlock()
	var sess *Session
	var ne net.Error
	switch {
	case err == nil:
		sess, err = s.open(h)
	case closed:
		// Counted here, not where the deadline moved: a request that
		// arrived meanwhile is served.
		s.pendingClosed.Add(1)
		err = fmt.Errorf("%w: over %d connections are waiting to send their request; this one waited longest", ErrBusy, s.opts.MaxPending)
	case errors.As(err, &ne) && ne.Timeout():
		s.helloTimeouts.Add(1)
		err = fmt.Errorf("%w: no request within %v", ErrHelloTimeout, s.opts.HelloTimeout)
	}
	if err != nil {
		code := "bad_request"
		switch {
		case errors.Is(err, ErrLimit), errors.Is(err, ErrQuota), errors.Is(err, ErrBusy):
			code = "overloaded"
		case errors.Is(err, ErrHelloTimeout):
			code = "timeout"
		case errors.Is(err, ErrClosed):
			code = "unavailable"
		case errors.Is(err, ErrBadHello):
		default:
			// Only Authenticate fails otherwise.
			code = "unauthenticated"
		}
		line, _ := json.Marshal(answer{Error: &answerError{Code: code, Message: err.Error()}})
		c.SetWriteDeadline(time.Now().Add(s.opts.HelloTimeout))
		c.Write(append(line, '\n'))
		return
	}
	defer s.free(sess)
	line, _ := json.Marshal(answer{Session: sess.id, Size: sess.size})
	c.SetWriteDeadline(time.Now().Add(s.opts.HelloTimeout))
	if _, _, err := c.WriteMsgUnix(append(line, '\n'), unix.UnixRights(int(sess.mem.File().Fd())), nil); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	c.SetWriteDeadline(time.Time{})
	if s.opts.Handle == nil {
		// The client sends nothing more; EOF (or anything else) ends
		// the session.
		io.Copy(io.Discard, io.LimitReader(c, 1))
		return
	}
	s.requests(c, sess)
}

// requests answers the session's request lines until the client hangs up
// or sends a line over MaxRequestBytes.
func (s *Server) requests(c *net.UnixConn, sess *Session) {
	f := newFDConn(c, s.opts.MaxRegions)
	defer f.close()
	r := bufio.NewReaderSize(f, 64<<10)
	w := newAnswerWriter(c)
	var line []byte
	for {
		line = line[:0]
		for {
			chunk, err := r.ReadSlice('\n')
			line = append(line, chunk...)
			if len(line) > s.opts.MaxRequestBytes {
				msg, _ := json.Marshal(answer{Error: &answerError{Code: "too_large", Message: fmt.Sprintf("staging: request line over %d bytes", s.opts.MaxRequestBytes)}})
				w.write(msg)
				return
			}
			if err == nil {
				break
			}
			if err != bufio.ErrBufferFull {
				return
			}
		}
		out, ok := s.regionRequest(f, sess, line)
		if !ok {
			sess.mu.RLock()
			out = s.opts.Handle(s.ctx, sess, line)
			sess.mu.RUnlock()
		}
		if w.write(out) != nil {
			return
		}
	}
}

// open authenticates a request and creates its session.
func (s *Server) open(h hello) (*Session, error) {
	owner, value, err := s.opts.Authenticate(h.Token)
	if err != nil {
		return nil, err
	}
	if err := s.reserve(owner, h.Size); err != nil {
		return nil, err
	}
	mem, err := rdma.NewSharedMemory("yuebing-staging", int(h.Size))
	if err != nil {
		s.unreserve(owner, h.Size)
		return nil, fmt.Errorf("%w: %v", ErrLimit, err)
	}
	var id [16]byte
	rand.Read(id[:])
	sess := &Session{id: hex.EncodeToString(id[:]), owner: owner, size: h.Size, mem: mem, Value: value}
	s.mu.Lock()
	s.mu.sessions[sess.id] = sess
	s.mu.Unlock()
	return sess, nil
}

// reserve counts a session of size bytes for owner against the limits,
// the owner's quotas first: an owner over its own is told so.
func (s *Server) reserve(owner string, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.mu.owners[owner]
	if u == nil {
		u = &ownerUse{}
	}
	switch {
	case s.mu.closed:
		return ErrClosed
	case u.sessions >= s.opts.MaxOwnerSessions:
		s.quotaRefusals.Add(1)
		return fmt.Errorf("%w: %d sessions of this principal are open, at most %d each; other principals may still open theirs", ErrQuota, u.sessions, s.opts.MaxOwnerSessions)
	case u.bytes+size > int64(s.opts.MaxOwnerBytes):
		s.quotaRefusals.Add(1)
		return fmt.Errorf("%w: this principal's sessions hold %d bytes, at most %d each; other principals may still open theirs", ErrQuota, u.bytes, s.opts.MaxOwnerBytes)
	case s.mu.open >= s.opts.MaxSessions:
		return fmt.Errorf("%w: %d sessions are open", ErrLimit, s.mu.open)
	case s.mu.used+size > int64(s.opts.MaxBytes):
		return fmt.Errorf("%w: %d of %d bytes are in use", ErrLimit, s.mu.used, s.opts.MaxBytes)
	}
	u.sessions++
	u.bytes += size
	s.mu.owners[owner] = u
	s.mu.open++
	s.mu.used += size
	return nil
}

func (s *Server) unreserve(owner string, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.mu.owners[owner]
	if u == nil || u.sessions <= 0 || s.mu.open <= 0 {
		panic("BUG: staging: releasing a session that was not reserved")
	}
	u.sessions--
	u.bytes -= size
	if u.sessions == 0 {
		delete(s.mu.owners, owner)
	}
	s.mu.open--
	s.mu.used -= size
}

// readHello reads and checks a client's request: one line of JSON.
func readHello(r io.Reader, maxSize int64) (hello, error) {
	var h hello
	line, err := bufio.NewReaderSize(io.LimitReader(r, maxHello), maxHello).ReadSlice('\n')
	if err != nil {
		return h, fmt.Errorf("%w: want one line of JSON ending in a newline, at most %d bytes: %w", ErrBadHello, maxHello, err)
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return h, fmt.Errorf("%w: %v", ErrBadHello, err)
	}
	if h.Size <= 0 || h.Size > maxSize {
		return h, fmt.Errorf("%w: size %d: want 1 to %d bytes", ErrBadHello, h.Size, maxSize)
	}
	return h, nil
}

// free forgets the session, waits for requests using it, releases its
// pages and unmaps it.
func (s *Server) free(sess *Session) {
	s.mu.Lock()
	delete(s.mu.sessions, sess.id)
	s.mu.Unlock()
	sess.mu.Lock()
	sess.closed = true
	s.freeRegionsLocked(sess)
	// A client may keep its mapping (and the descriptor) after hanging
	// up, which would keep every page alive past the session and let
	// clients hold more than MaxBytes. Punching the whole file out frees
	// the pages whoever maps them; a client that touches its mapping
	// again gets fresh zero pages of its own, charged to it. The seals
	// forbid resizing, not this (KEEP_SIZE).
	if err := unix.Fallocate(int(sess.mem.File().Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, sess.size); err != nil {
		s.opts.Logger.Warn("staging: releasing a segment's pages", "err", err)
	}
	if err := sess.mem.Close(); err != nil {
		s.opts.Logger.Warn("staging: freeing a segment", "err", err)
	}
	sess.mu.Unlock()
	s.unreserve(sess.owner, sess.size)
}

// Acquire returns the open session id of owner, held until release is
// called: its segment stays mapped meanwhile. A session of another owner
// is reported as missing.
func (s *Server) Acquire(id, owner string) (*Session, func(), error) {
	s.mu.Lock()
	sess, ok := s.mu.sessions[id]
	s.mu.Unlock()
	if !ok || sess.owner != owner {
		return nil, nil, fmt.Errorf("%w: %q", ErrNoSession, id)
	}
	sess.mu.RLock()
	if sess.closed {
		sess.mu.RUnlock()
		return nil, nil, fmt.Errorf("%w: %q", ErrNoSession, id)
	}
	return sess, sess.mu.RUnlock, nil
}

// Stats reports open sessions and their bytes, those being created
// included.
func (s *Server) Stats() (sessions int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.open, s.mu.used
}

// Close stops accepting, ends every session and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.cancel()
	for c := range s.mu.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// Counters are the server's totals since it started.
type Counters struct {
	Accepted int64
	// PendingClosed counts connections closed unheard because MaxPending
	// newer ones were waiting to send their request.
	PendingClosed int64
	// HelloTimeouts counts connections that sent no request within
	// HelloTimeout.
	HelloTimeouts int64
	// AcceptErrors counts failed accepts (EMFILE and the like); the
	// server retries them.
	AcceptErrors int64
	// QuotaRefusals counts sessions refused for MaxOwnerSessions or
	// MaxOwnerBytes.
	QuotaRefusals int64
}

// Counters returns the server's counters.
func (s *Server) Counters() Counters {
	return Counters{
		Accepted: s.accepted.Load(), PendingClosed: s.pendingClosed.Load(), HelloTimeouts: s.helloTimeouts.Load(),
		AcceptErrors: s.acceptErrors.Load(), QuotaRefusals: s.quotaRefusals.Load(),
	}
}
