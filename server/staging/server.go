package staging

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/rdma"
)

// helloTimeout bounds how long a connection may take to send its request:
// a client that connects and says nothing must not hold a slot.
const helloTimeout = 10 * time.Second

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

	mu struct {
		sync.Mutex
		sessions map[string]*Session
		conns    map[*net.UnixConn]struct{}
		used     int64
		closed   bool
	}
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
	return s, nil
}

// Listener returns the bound socket, for reporting its address; Serve
// accepts on it.
func (s *Server) Listener() net.Listener { return s.ln }

// Addr returns the socket's name as clients dial it ("@name" for an
// abstract socket).
func (s *Server) Addr() string { return s.opts.Listen }

// Serve accepts clients until Close; it returns nil after Close.
func (s *Server) Serve() error {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("staging: accept: %w", err)
		}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.mu.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.mu.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.handle(c)
		})
	}
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
func (s *Server) handle(c *net.UnixConn) {
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	sess, err := s.open(c)
	if err != nil {
		code := "bad_request"
		switch {
		case errors.Is(err, ErrLimit):
			code = "overloaded"
		case errors.Is(err, ErrClosed):
			code = "unavailable"
		case errors.Is(err, ErrBadHello):
		default:
			// Only Authenticate fails otherwise.
			code = "unauthenticated"
		}
		line, _ := json.Marshal(answer{Error: &answerError{Code: code, Message: err.Error()}})
		c.SetWriteDeadline(time.Now().Add(helloTimeout))
		c.Write(append(line, '\n'))
		return
	}
	defer s.free(sess)
	line, _ := json.Marshal(answer{Session: sess.id, Size: sess.size})
	c.SetWriteDeadline(time.Now().Add(helloTimeout))
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
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	var line []byte
	for {
		line = line[:0]
		for {
			chunk, err := r.ReadSlice('\n')
			line = append(line, chunk...)
			if len(line) > s.opts.MaxRequestBytes {
				msg, _ := json.Marshal(answer{Error: &answerError{Code: "too_large", Message: fmt.Sprintf("staging: request line over %d bytes", s.opts.MaxRequestBytes)}})
				w.Write(append(msg, '\n'))
				w.Flush()
				return
			}
			if err == nil {
				break
			}
			if err != bufio.ErrBufferFull {
				return
			}
		}
		sess.mu.RLock()
		out := s.opts.Handle(s.ctx, sess, line)
		sess.mu.RUnlock()
		w.Write(out)
		w.WriteByte('\n')
		if w.Flush() != nil {
			return
		}
	}
}

// open reads the request and creates the session.
func (s *Server) open(c *net.UnixConn) (*Session, error) {
	h, err := readHello(c, s.opts.MaxSessionBytes)
	if err != nil {
		return nil, err
	}
	owner, value, err := s.opts.Authenticate(h.Token)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	switch {
	case s.mu.closed:
		s.mu.Unlock()
		return nil, ErrClosed
	case len(s.mu.sessions) >= s.opts.MaxSessions:
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %d sessions are open", ErrLimit, len(s.mu.sessions))
	case s.mu.used+h.Size > s.opts.MaxBytes:
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %d of %d bytes are in use", ErrLimit, s.mu.used, s.opts.MaxBytes)
	}
	s.mu.used += h.Size
	s.mu.Unlock()
	mem, err := rdma.NewSharedMemory("yuebing-staging", int(h.Size))
	if err != nil {
		s.mu.Lock()
		s.mu.used -= h.Size
		s.mu.Unlock()
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

// readHello reads and checks a client's request: one line of JSON.
func readHello(r io.Reader, maxSize int64) (hello, error) {
	var h hello
	line, err := bufio.NewReaderSize(io.LimitReader(r, maxHello), maxHello).ReadSlice('\n')
	if err != nil {
		return h, fmt.Errorf("%w: want one line of JSON ending in a newline, at most %d bytes: %v", ErrBadHello, maxHello, err)
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return h, fmt.Errorf("%w: %v", ErrBadHello, err)
	}
	if h.Size <= 0 || h.Size > maxSize {
		return h, fmt.Errorf("%w: size %d: want 1 to %d bytes", ErrBadHello, h.Size, maxSize)
	}
	return h, nil
}

// free forgets the session, waits for requests using it and unmaps it.
func (s *Server) free(sess *Session) {
	s.mu.Lock()
	delete(s.mu.sessions, sess.id)
	s.mu.Unlock()
	sess.mu.Lock()
	sess.closed = true
	if err := sess.mem.Close(); err != nil {
		s.opts.Logger.Warn("staging: freeing a segment", "err", err)
	}
	sess.mu.Unlock()
	s.mu.Lock()
	s.mu.used -= sess.size
	s.mu.Unlock()
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

// Stats reports open sessions and their bytes.
func (s *Server) Stats() (sessions int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.sessions), s.mu.used
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
