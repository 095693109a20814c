package resp

import (
	"bufio"
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// pipeListener is a listener of in-memory connections (net.Pipe). A
// server on it runs inside a testing/synctest bubble, where its timers
// (the expiry sweep, stall deadlines) run on the bubble's clock: a test
// sleeps past them at once instead of waiting for them.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// dial connects a raw client to the server on l.
func (l *pipeListener) dial(t testing.TB) *rawConn {
	t.Helper()
	client, server := net.Pipe()
	select {
	case l.conns <- server:
	case <-l.done:
		t.Fatal("dial: listener closed")
	}
	t.Cleanup(func() { client.Close() })
	return &rawConn{t: t, nc: client, br: bufio.NewReaderSize(client, 1<<16)}
}

// startBubbleServer serves opts (with a test store unless opts.Store is
// set) on a pipeListener; call it inside synctest.Test.
func startBubbleServer(t testing.TB, opts Options) (*testServer, *pipeListener) {
	t.Helper()
	if opts.Store == nil {
		opts.Store = testStore(t, 64<<20, 256<<20)
		t.Cleanup(func() { opts.Store.Close() })
	}
	s, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln := newPipeListener()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{Server: s, addr: "pipe", store: opts.Store}, ln
}
