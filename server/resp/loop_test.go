//go:build linux

package resp

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// eventLoop runs the package's tests with Options.EventLoop on:
// go test ./server/resp/ -args -resp.loop
var eventLoop = flag.Bool("resp.loop", false, "serve the tests' connections from event loops")

// inLoops counts the connections the server's loops hold.
func inLoops(s *Server) int {
	n := 0
	for _, l := range s.loops.all {
		l.mu.Lock()
		n += len(l.mu.conns)
		l.mu.Unlock()
	}
	return n
}

// waitLoops waits until the loops hold want connections.
func waitLoops(t *testing.T, s *Server, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for inLoops(s) != want {
		if time.Now().After(deadline) {
			t.Fatalf("connections in the loops: %d, want %d", inLoops(s), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func startLoopServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	opts.EventLoop = true
	if opts.EventLoops == 0 {
		opts.EventLoops = 2
	}
	return startServer(t, opts)
}

// TestLoopByteAtATime: a request that comes one byte per write is run
// once whole, and the connection stays in its loop.
func TestLoopByteAtATime(t *testing.T) {
	s := startLoopServer(t, Options{})
	c := dial(t, s.addr)
	req := multibulk("SET", "k", "v") + multibulk("GET", "k") + multibulk("INCR", "n")
	for i := range len(req) {
		c.send(req[i : i+1])
		time.Sleep(100 * time.Microsecond)
	}
	for _, want := range []string{"+OK\r\n", "$1\r\nv\r\n", ":1\r\n"} {
		if got := c.reply(); got != want {
			t.Fatalf("reply %q, want %q", got, want)
		}
	}
	waitLoops(t, s.Server, 1)
}

// TestLoopPipeline: many requests in one write are answered in order, and
// a client that reads none of its replies for a while gets all of them.
func TestLoopPipeline(t *testing.T) {
	s := startLoopServer(t, Options{})
	c := dial(t, s.addr)
	val := strings.Repeat("x", 1000) // inline: the loop serves it
	c.do("SET", "big", val)
	var b strings.Builder
	const n = 5000 // ~5 MB of replies: far more than the socket buffers
	for i := range n {
		b.WriteString(multibulk("GET", "big"))
		b.WriteString(multibulk("ECHO", fmt.Sprint(i)))
	}
	go func() { io.WriteString(c.nc, b.String()) }()
	time.Sleep(300 * time.Millisecond) // a slow reader: the loop must wait for room
	wantGet := fmt.Sprintf("$%d\r\n%s\r\n", len(val), val)
	for i := range n {
		if got := c.reply(); got != wantGet {
			t.Fatalf("reply %d: %.40q", i, got)
		}
		if got, want := c.reply(), fmt.Sprintf("$%d\r\n%d\r\n", len(fmt.Sprint(i)), i); got != want {
			t.Fatalf("reply %d: %q, want %q", i, got, want)
		}
	}
	waitLoops(t, s.Server, 1)
}

// TestLoopHandoffKeepsOrder: a command the loop does not run (a value
// that streams into the store, MULTI) in the middle of a pipeline moves
// the connection to a goroutine with the replies in request order.
func TestLoopHandoffKeepsOrder(t *testing.T) {
	s := startLoopServer(t, Options{})
	c := dial(t, s.addr)
	c.do("PING")
	waitLoops(t, s.Server, 1)
	big := strings.Repeat("b", 200<<10)
	c.send(multibulk("SET", "a", "1") + multibulk("GET", "a") + multibulk("SET", "big", big) +
		multibulk("GET", "big") + multibulk("MULTI") + multibulk("INCR", "a") + multibulk("EXEC") + multibulk("PING"))
	for i, want := range []string{"+OK\r\n", "$1\r\n1\r\n", "+OK\r\n", fmt.Sprintf("$%d\r\n%s\r\n", len(big), big),
		"+OK\r\n", "+QUEUED\r\n", "*1\r\n:2\r\n", "+PONG\r\n"} {
		if got := c.reply(); got != want {
			t.Fatalf("reply %d: %.60q, want %.60q", i, got, want)
		}
	}
	waitLoops(t, s.Server, 0)
	if st := s.Stats(); st.ConnectedClients != 1 {
		t.Fatalf("connected clients %d, want 1", st.ConnectedClients)
	}
}

// TestLoopSlowReaderOfLargeGet: a 4 MiB GET (a store block: handed off)
// read a little at a time arrives whole.
func TestLoopSlowReaderOfLargeGet(t *testing.T) {
	s := startLoopServer(t, Options{})
	c := dial(t, s.addr)
	val := strings.Repeat("0123456789abcdef", 256<<10)
	if got := c.do("SET", "v", val); got != "+OK\r\n" {
		t.Fatal(got)
	}
	c.send(multibulk("GET", "v"))
	var got strings.Builder
	want := fmt.Sprintf("$%d\r\n%s\r\n", len(val), val)
	buf := make([]byte, 256<<10)
	for got.Len() < len(want) {
		c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.br.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes: %v", got.Len(), err)
		}
		got.Write(buf[:n])
		time.Sleep(time.Millisecond)
	}
	if got.String() != want {
		t.Fatal("the value read back differs")
	}
}

// TestLoopHostilePeer: a client that sends half a request, or one that
// never reads its replies, does not hold up another client of its loop.
func TestLoopHostilePeer(t *testing.T) {
	s := startLoopServer(t, Options{EventLoops: 1, StallTimeout: 300 * time.Millisecond})
	half := dial(t, s.addr)
	half.send("*2\r\n$3\r\nGET\r\n$5\r\nab")
	mute := dial(t, s.addr)
	var b strings.Builder
	for range 2000 {
		b.WriteString(multibulk("ECHO", strings.Repeat("e", 4000)))
	}
	go io.WriteString(mute.nc, b.String())
	c := dial(t, s.addr)
	for range 50 {
		if got := c.do("PING"); got != "+PONG\r\n" {
			t.Fatal(got)
		}
	}
	// Both stalled past StallTimeout: closed.
	if !half.closed() {
		t.Fatal("a half-sent request outlived the stall timeout")
	}
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
}

// TestLoopShutdown: Shutdown closes idle and mid-request connections of
// the loops, after writing the replies they had earned, and returns.
func TestLoopShutdown(t *testing.T) {
	st := testStore(t, 64<<20, 256<<20)
	t.Cleanup(func() { st.Close() })
	s, err := NewServer(Options{Store: st, EventLoop: true, EventLoops: 2})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	idle := dial(t, ln.Addr().String())
	idle.do("PING")
	partial := dial(t, ln.Addr().String())
	partial.do("PING")
	partial.send("*1\r\n$4\r\nPI")
	waitLoops(t, s, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for _, c := range []*rawConn{idle, partial} {
		if !c.closed() {
			t.Fatal("a connection outlived Shutdown")
		}
	}
	if n := s.Stats().ConnectedClients; n != 0 {
		t.Fatalf("connected clients after Shutdown: %d", n)
	}
}

// TestLoopFullReadIsReadAgain: requests far larger than one read, sent at
// once and followed by nothing, are all answered. Sockets are edge-
// triggered: after a read that fills the loop's buffer no new edge comes
// for the bytes left, so the loop must read again on its own.
func TestLoopFullReadIsReadAgain(t *testing.T) {
	s := startLoopServer(t, Options{EventLoops: 1})
	c := dial(t, s.addr)
	c.do("PING")
	waitLoops(t, s.Server, 1)
	const n = 20000 // ~520 KB: eight reads of the loop's 64 KiB at least
	var b strings.Builder
	for range n {
		b.WriteString(multibulk("INCR", "n"))
	}
	c.send(b.String())
	for i := 1; i <= n; i++ {
		if got, want := c.reply(), fmt.Sprintf(":%d\r\n", i); got != want {
			t.Fatalf("reply %d: %q, want %q", i, got, want)
		}
	}
	waitLoops(t, s.Server, 1)
}

// TestLoopPartialReads: a request cut at every offset, its halves a
// moment apart, is run once whole: each half is its own edge, and the
// first half's short read must not leave the second unread.
func TestLoopPartialReads(t *testing.T) {
	s := startLoopServer(t, Options{EventLoops: 1})
	c := dial(t, s.addr)
	req := multibulk("SET", "k", strings.Repeat("v", 28)) + multibulk("INCR", "n")
	for cut := 1; cut < len(req); cut++ {
		c.send(req[:cut])
		time.Sleep(200 * time.Microsecond)
		c.send(req[cut:])
		if got := c.reply(); got != "+OK\r\n" {
			t.Fatalf("cut %d: %q", cut, got)
		}
		if got, want := c.reply(), fmt.Sprintf(":%d\r\n", cut); got != want {
			t.Fatalf("cut %d: %q, want %q", cut, got, want)
		}
	}
	waitLoops(t, s.Server, 1)
}

// TestLoopManyConnsNoLostEvent: one loop serving many connections that mix
// single requests with pipelined bursts answers every request. The loop
// parks on the runtime's poller after a batch without asking epoll again,
// trusting that an event which came while the batch ran is a new edge; a
// lost one would leave a client waiting here until its deadline.
func TestLoopManyConnsNoLostEvent(t *testing.T) {
	s := startLoopServer(t, Options{EventLoops: 1})
	const conns, rounds = 64, 60
	errs := make(chan error, conns)
	for i := range conns {
		nc, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		go func() {
			errs <- loopClient(nc, fmt.Sprint("k", i), i, rounds)
		}()
	}
	for range conns {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waitLoops(t, s.Server, conns)
}

// loopClient runs rounds of one INCR, then a burst of 1 to 40 INCRs in a
// single write, on key, checking every reply's count.
func loopClient(nc net.Conn, key string, seed, rounds int) error {
	br := bufio.NewReader(nc)
	next := 0
	expect := func(k int) error {
		for range k {
			next++
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			var b strings.Builder
			if err := readReply(br, &b); err != nil {
				return fmt.Errorf("%s: reply %d: %w", key, next, err)
			}
			if want := fmt.Sprintf(":%d\r\n", next); b.String() != want {
				return fmt.Errorf("%s: reply %q, want %q", key, b.String(), want)
			}
		}
		return nil
	}
	one := multibulk("INCR", key)
	for r := range rounds {
		if _, err := io.WriteString(nc, one); err != nil {
			return err
		}
		if err := expect(1); err != nil {
			return err
		}
		burst := 1 + (seed*7+r*13)%40
		if _, err := io.WriteString(nc, strings.Repeat(one, burst)); err != nil {
			return err
		}
		if err := expect(burst); err != nil {
			return err
		}
	}
	return nil
}

// TestLoopHalfClose: a client that sends a request and shuts its side
// down at once gets the reply, then the server's close. Sockets are
// edge-triggered, and the FIN can come within the request's edge, so a
// short read does not prove the socket has nothing more to tell: a loop
// that trusted it would keep the connection open for good.
func TestLoopHalfClose(t *testing.T) {
	s := startLoopServer(t, Options{EventLoops: 1})
	for i := range 20 {
		nc, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		tc := nc.(*net.TCPConn)
		if _, err := io.WriteString(tc, multibulk("INCR", "n")); err != nil {
			t.Fatal(err)
		}
		if err := tc.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		tc.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(tc)
		tc.Close()
		if err != nil {
			t.Fatalf("conn %d: the server did not close a half-closed connection: %v (read %q)", i, err, got)
		}
		if want := fmt.Sprintf(":%d\r\n", i+1); string(got) != want {
			t.Fatalf("conn %d: %q, want %q", i, got, want)
		}
	}
	waitLoops(t, s.Server, 0)
}
