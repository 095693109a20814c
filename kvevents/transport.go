package kvevents

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// guardedTCPName is the name under which the guarded TCP transport is
// registered with zmq4; endpoints are rewritten to it (guardedEndpoint).
const guardedTCPName = "yuebing-tcp"

// guardedTCPOnce registers the transport once per process.
var guardedTCPOnce = sync.OnceValue(func() error {
	return zmq4.RegisterTransport(guardedTCPName, guardedTCP{transport.New("tcp")})
})

// guardConfig is what the guarded transport applies to one socket's
// connections. It travels in the context the socket is made with, which
// zmq4 hands to the transport's Dial and Listen.
type guardConfig struct {
	lim FrameLimits
	// peerTypes are the ZMQ socket types a peer may be (zmq4.SocketType
	// names); the handshake of any other is refused.
	peerTypes []string
	// handshake bounds the time from connecting to the peer's READY.
	handshake time.Duration
	// maxConns bounds the connections a bound socket holds at once; more
	// are closed as they arrive.
	maxConns int
	stats    *Stats // may be nil
	log      *slog.Logger
}

type guardKey struct{}

// withGuard returns ctx carrying cfg for the sockets made with it.
func withGuard(ctx context.Context, cfg guardConfig) context.Context {
	return context.WithValue(ctx, guardKey{}, cfg)
}

// defaultGuard applies to a socket made without withGuard: the live
// limits, any peer type.
var defaultGuard = guardConfig{
	lim:       DefaultFrameLimits(),
	handshake: 5 * time.Second,
	maxConns:  64,
}

func guardFrom(ctx context.Context) guardConfig {
	cfg, ok := ctx.Value(guardKey{}).(guardConfig)
	if !ok {
		cfg = defaultGuard
	}
	if cfg.log == nil {
		cfg.log = slog.Default()
	}
	return cfg
}

// DefaultFrameLimits are the limits on a live event stream. vLLM sends a
// batch as one message of three frames; a batch of a few thousand events
// with their token ids is a few hundred KiB, so 16 MiB leaves room for the
// largest while a stalled consumer holds at most (ZMQ's queue of 10 + one
// per connection) such messages.
func DefaultFrameLimits() FrameLimits {
	return FrameLimits{MaxFrameBytes: 16 << 20, MaxMessageBytes: 16 << 20, MaxFrames: 16}
}

// guardedTCP is zmq4's TCP transport with every connection, dialled or
// accepted, read through a zmtpGuard.
type guardedTCP struct{ transport.Transport }

// Dial implements transport.Transport.
func (t guardedTCP) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := t.Transport.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	return newGuardConn(c, guardFrom(ctx), nil), nil
}

// Listen implements transport.Transport.
func (t guardedTCP) Listen(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return newGuardListener(ctx, ln, guardFrom(ctx)), nil
}

// guardConn reads through a zmtpGuard. Until the peer's READY has been
// checked it closes itself on any error: zmq4 abandons a connection
// whose handshake fails without closing it.
type guardConn struct {
	net.Conn
	g       *zmtpGuard
	cfg     guardConfig
	release func() // gives back a listener's slot; may be nil
	once    sync.Once
	mu      sync.Mutex
	ready   bool
}

func newGuardConn(c net.Conn, cfg guardConfig, release func()) *guardConn {
	gc := &guardConn{Conn: c, cfg: cfg, release: release}
	if cfg.handshake > 0 {
		_ = c.SetDeadline(time.Now().Add(cfg.handshake))
	}
	gc.g = newZMTPGuard(c, cfg.lim, cfg.peerTypes, func() {
		gc.mu.Lock()
		gc.ready = true
		gc.mu.Unlock()
		_ = c.SetDeadline(time.Time{})
	})
	return gc
}

func (c *guardConn) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// Read implements net.Conn.
func (c *guardConn) Read(p []byte) (int, error) {
	n, err := c.g.Read(p)
	if err != nil {
		if errors.Is(err, ErrFrame) || errors.Is(err, ErrFrameTooLarge) {
			if c.cfg.stats != nil {
				c.cfg.stats.Rejected.Add(1)
			}
			c.cfg.log.Warn("kvevents: dropping a ZMQ peer", "peer", c.RemoteAddr().String(), "err", err)
			c.Close()
		} else if !c.isReady() {
			c.Close()
		}
	}
	return n, err
}

// Write implements net.Conn.
func (c *guardConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && !c.isReady() {
		c.Close()
	}
	return n, err
}

// Close implements net.Conn; it may be called more than once.
func (c *guardConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		err = c.Conn.Close()
		if c.release != nil {
			c.release()
		}
	})
	return err
}

// guardListener hands zmq4 guarded connections, at most cfg.maxConns at
// once. zmq4 accepts and handshakes one connection at a time, so a peer
// that connects and says nothing would hold up every connection after it:
// the listener accepts on a goroutine of its own and hands a connection
// on only once its peer has sent its first bytes (every ZMQ peer sends its
// greeting's signature at once), within the handshake timeout. Accept
// errors (EMFILE) are retried with a backoff, never returned while the
// socket is open: zmq4's loop would retry them at once, spinning.
type guardListener struct {
	net.Listener
	ctx   context.Context
	cfg   guardConfig
	slots chan struct{}
	ready chan net.Conn
}

func newGuardListener(ctx context.Context, ln net.Listener, cfg guardConfig) *guardListener {
	l := &guardListener{Listener: ln, ctx: ctx, cfg: cfg, slots: make(chan struct{}, max(cfg.maxConns, 1)), ready: make(chan net.Conn)}
	go l.loop()
	return l
}

func (l *guardListener) loop() {
	var wait time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || l.ctx.Err() != nil {
				return
			}
			wait = min(max(2*wait, 5*time.Millisecond), time.Second)
			l.cfg.log.Warn("kvevents: accept failed; retrying", "err", err, "in", wait)
			select {
			case <-l.ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		wait = 0
		select {
		case l.slots <- struct{}{}:
		default:
			if l.cfg.stats != nil {
				l.cfg.stats.Rejected.Add(1)
			}
			l.cfg.log.Warn("kvevents: refusing a ZMQ peer: too many connections", "peer", c.RemoteAddr().String(), "max", cap(l.slots))
			c.Close()
			continue
		}
		gc := newGuardConn(c, l.cfg, func() { <-l.slots })
		go func() {
			// The handshake deadline is set: a silent peer is given up.
			if _, err := gc.g.r.Peek(1); err != nil {
				gc.Close()
				return
			}
			select {
			case l.ready <- gc:
			case <-l.ctx.Done():
				gc.Close()
			}
		}()
	}
}

// Accept implements net.Listener.
func (l *guardListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.ctx.Done():
		// zmq4's loop only stops once its context ends.
		return nil, net.ErrClosed
	}
}

// guardedEndpoint returns a "tcp://" endpoint under the guarded
// transport. It fails only if the transport could not be registered,
// which would leave peers' frames unchecked.
func guardedEndpoint(ep string) (string, error) {
	if err := guardedTCPOnce(); err != nil {
		return "", err
	}
	if rest, ok := strings.CutPrefix(ep, "tcp://"); ok {
		return guardedTCPName + "://" + rest, nil
	}
	return ep, nil
}
