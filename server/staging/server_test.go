package staging

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newServer(t *testing.T, opts Options) *Server {
	t.Helper()
	opts.Listen = fmt.Sprintf("@yuebing-staging-test-%d-%s", os.Getpid(), t.Name())
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s
}

// open is a client: it asks for a session and maps the descriptor it gets.
func open(t *testing.T, s *Server, line string) (*net.UnixConn, answer, []byte) {
	t.Helper()
	c, a, mem, fd := openFD(t, s, line)
	if fd >= 0 {
		unix.Close(fd)
	}
	return c, a, mem
}

// dial connects to s without saying anything.
func dial(t *testing.T, s *Server) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: s.Addr(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// openFD is open keeping the descriptor (-1 on a refusal), as a client
// that holds on to the segment does; the caller closes it.
func openFD(t *testing.T, s *Server, line string) (*net.UnixConn, answer, []byte, int) {
	t.Helper()
	c := dial(t, s)
	if _, err := c.Write([]byte(line)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	if err := json.Unmarshal(bytes.TrimSpace(buf[:n]), &a); err != nil {
		t.Fatalf("answer %q: %v", buf[:n], err)
	}
	if a.Error != nil {
		if oobn != 0 {
			t.Fatal("a refusal carried a descriptor")
		}
		return c, a, nil, -1
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control messages: %v %v", msgs, err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("descriptors: %v %v", fds, err)
	}
	mem, err := unix.Mmap(fds[0], 0, int(a.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fds[0])
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return c, a, mem, fds[0]
}

func TestSessionSharesMemory(t *testing.T) {
	s := newServer(t, Options{Authenticate: func(tok string) (string, any, error) {
		if tok != "secret" {
			return "", nil, errors.New("unknown token")
		}
		return "alpha", nil, nil
	}})
	c, a, mem := open(t, s, `{"token":"secret","size":65536}`+"\n")
	if a.Size != 65536 || len(a.Session) != 32 {
		t.Fatalf("answer %+v", a)
	}
	sess, release, err := s.Acquire(a.Session, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	copy(sess.Bytes()[100:], "from the server")
	copy(mem[200:], "from the client")
	if got := string(mem[100:115]); got != "from the server" {
		t.Fatalf("client sees %q", got)
	}
	if got := string(sess.Bytes()[200:215]); got != "from the client" {
		t.Fatalf("server sees %q", got)
	}
	release()
	if _, _, err := s.Acquire(a.Session, "beta"); !errors.Is(err, ErrNoSession) {
		t.Fatalf("another owner acquired the session: %v", err)
	}
	if _, _, err := s.Acquire("nope", "alpha"); !errors.Is(err, ErrNoSession) {
		t.Fatalf("unknown session: %v", err)
	}
	if n, b := s.Stats(); n != 1 || b != 65536 {
		t.Fatalf("stats %d sessions %d bytes", n, b)
	}
	// Hanging up frees the session.
	c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n, b := s.Stats(); n == 0 && b == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("session not freed after the client hung up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := s.Acquire(a.Session, "alpha"); !errors.Is(err, ErrNoSession) {
		t.Fatalf("closed session acquired: %v", err)
	}
	// The client's mapping outlives the session, not what it held: the
	// pages went with the session.
	if got := string(mem[100:115]); got != strings.Repeat("\x00", 15) {
		t.Fatalf("client mapping after close: %q", got)
	}
}

func TestRefusals(t *testing.T) {
	s := newServer(t, Options{MaxSessionBytes: 1 << 20, MaxBytes: 1 << 20, MaxSessions: 2, MaxOwnerSessions: 2,
		Authenticate: func(tok string) (string, any, error) {
			if tok != "ok" {
				return "", nil, errors.New("unknown token")
			}
			return "", nil, nil
		}})
	f := func(line, code string) {
		t.Helper()
		_, a, _ := open(t, s, line)
		if a.Error == nil || a.Error.Code != code {
			t.Fatalf("%q: answer %+v, want code %s", line, a, code)
		}
	}
	f("not json\n", "bad_request")
	f(`{"token":"ok","size":0}`+"\n", "bad_request")
	f(`{"token":"ok","size":-5}`+"\n", "bad_request")
	f(`{"token":"ok","size":2097152}`+"\n", "bad_request")
	f(`{"token":"bad","size":4096}`+"\n", "unauthenticated")
	open(t, s, `{"token":"ok","size":1048000}`+"\n")
	f(`{"token":"ok","size":4096}`+"\n", "overloaded") // bytes
	_, a, _ := open(t, s, `{"token":"ok","size":500}`+"\n")
	if a.Error != nil {
		t.Fatal(a.Error)
	}
	f(`{"token":"ok","size":10}`+"\n", "overloaded") // sessions
}

func TestLongHelloIsRefused(t *testing.T) {
	s := newServer(t, Options{})
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: s.Addr(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(bytes.Repeat([]byte("x"), 2*maxHello))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !bytes.Contains([]byte(line), []byte("bad_request")) {
		t.Fatalf("answer %q, %v", line, err)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{}
	o.EnsureDefaults()
	if err := o.Validate(); err == nil {
		t.Fatal("no Listen accepted")
	}
	o = Options{Listen: "@x", MaxSessionBytes: 2 << 30}
	o.EnsureDefaults()
	if err := o.Validate(); err == nil {
		t.Fatal("session larger than the total accepted")
	}
	o = Options{Listen: "@x", MaxPending: -1, HelloTimeout: -time.Second}
	o.EnsureDefaults()
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "pending") {
		t.Fatalf("negative pending bound and timeout: %v", err)
	}
	o = Options{Listen: "@x", MaxSessions: 2, MaxBytes: 1 << 20, MaxSessionBytes: 1 << 20}
	o.EnsureDefaults()
	if o.MaxOwnerSessions != 1 || o.MaxOwnerBytes != 1<<20 || o.MaxPending != 128 || o.HelloTimeout != 5*time.Second {
		t.Fatalf("defaults %+v", o)
	}
}

func TestRequestsOnTheSocket(t *testing.T) {
	s := newServer(t, Options{MaxRequestBytes: 1 << 10, Handle: func(_ context.Context, sess *Session, line []byte) []byte {
		// Answers with what the segment holds at the offset the line
		// names: the handler sees the client's writes.
		var off int
		fmt.Sscanf(string(line), "%d", &off)
		return append([]byte(nil), sess.Bytes()[off:off+5]...)
	}})
	c, a, mem := open(t, s, `{"size":4096}`+"\n")
	if a.Error != nil {
		t.Fatal(a.Error)
	}
	copy(mem[100:], "hello")
	copy(mem[200:], "world")
	r := bufio.NewReader(c)
	for _, tc := range []struct{ req, want string }{{"100\n", "hello"}, {"200\n", "world"}} {
		c.Write([]byte(tc.req))
		line, err := r.ReadString('\n')
		if err != nil || line != tc.want+"\n" {
			t.Fatalf("%q: %q %v", tc.req, line, err)
		}
	}
	c.Write(append(bytes.Repeat([]byte("1"), 2<<10), '\n'))
	line, _ := r.ReadString('\n')
	if !strings.Contains(line, "too_large") {
		t.Fatalf("long line: %q", line)
	}
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("connection still open after a line over the limit")
	}
}
