package staging

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// refusal reads the one answer line of a refused connection and then
// expects the server to hang up.
func refusal(t *testing.T, r io.Reader) answer {
	t.Helper()
	br := bufio.NewReader(r)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("answer %q: %v", line, err)
	}
	var a answer
	if err := json.Unmarshal([]byte(line), &a); err != nil || a.Error == nil {
		t.Fatalf("answer %q, want an error: %v", line, err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the refusal: %v, want EOF", err)
	}
	return a
}

// waitSessions waits until s has n sessions open: a session ends shortly
// after its client hangs up.
func waitSessions(t *testing.T, s *Server, n int) {
	t.Helper()
	for {
		if got, _ := s.Stats(); got == n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Connections that never send their request take the oldest pending
// slots: each newer connection closes the oldest, so a client that speaks
// at once is served however many silent ones came before it.
func TestSilentClientsDoNotLockOthersOut(t *testing.T) {
	s := newServer(t, Options{MaxPending: 4, HelloTimeout: time.Hour})
	silent := make([]io.Reader, 12)
	for i := range silent {
		silent[i] = dial(t, s)
	}
	// Connections are accepted in the order they connected: the first
	// eight made room for the last four.
	for i, c := range silent[:8] {
		if a := refusal(t, c); a.Error.Code != "overloaded" {
			t.Fatalf("silent client %d: %+v", i, a.Error)
		}
	}
	_, a, mem := open(t, s, `{"size":4096}`+"\n")
	if a.Error != nil || len(mem) != 4096 {
		t.Fatalf("a client that speaks: %+v", a.Error)
	}
	// Its connection closed the oldest silent one left.
	if a := refusal(t, silent[8]); a.Error.Code != "overloaded" {
		t.Fatalf("silent client 8: %+v", a.Error)
	}
	if c := s.Counters(); c.PendingClosed != 9 || c.Accepted != 13 {
		t.Fatalf("counters %+v, want 9 pending closed of 13 accepted", c)
	}
}

func TestHelloTimeout(t *testing.T) {
	s := newServer(t, Options{HelloTimeout: 50 * time.Millisecond})
	c := dial(t, s)
	c.Write([]byte(`{"size":`)) // and no more
	if a := refusal(t, c); a.Error.Code != "timeout" {
		t.Fatalf("silent client: %+v", a.Error)
	}
	if c := s.Counters(); c.HelloTimeouts != 1 {
		t.Fatalf("counters %+v", c)
	}
	if _, a, _ := open(t, s, `{"size":4096}`+"\n"); a.Error != nil {
		t.Fatal(a.Error)
	}
}

// A process out of descriptors fails accept with EMFILE; the server waits
// and accepts again instead of returning, and serves the client once
// descriptors are free.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	s, err := New(Options{Listen: fmt.Sprintf("@yuebing-staging-test-%d-%s", os.Getpid(), t.Name())})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	// The client's socket exists before the table is full: connect needs
	// no descriptor, accept does.
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	low := orig
	low.Cur = uint64(len(fds) + 32)
	if low.Cur > orig.Cur {
		t.Skipf("descriptor limit %d is already low", orig.Cur)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
			t.Error(err)
		}
	}
	defer restore()
	var fill []int
	release := func() {
		for _, d := range fill {
			unix.Close(d)
		}
		fill = nil
	}
	defer release()
	for {
		d, err := unix.Dup(fd)
		if errors.Is(err, unix.EMFILE) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		fill = append(fill, d)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: s.Addr()}); err != nil {
		t.Fatal(err)
	}
	for s.Counters().AcceptErrors == 0 {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("Serve returned out of descriptors: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	release()
	restore()
	if _, err := unix.Write(fd, []byte(`{"size":4096}`+"\n")); err != nil {
		t.Fatal(err)
	}
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	if err := json.Unmarshal(buf[:n], &a); err != nil || a.Error != nil || a.Size != 4096 {
		t.Fatalf("answer %q: %v", buf[:n], err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control messages %v: %v", msgs, err)
	}
	if got, err := unix.ParseUnixRights(&msgs[0]); err == nil {
		for _, d := range got {
			unix.Close(d)
		}
	}
}

// allocated returns the bytes of memory fd's file holds.
func allocated(t *testing.T, fd int) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// A client that keeps its mapping and descriptor after hanging up keeps
// nothing the server wrote: the pages go with the session, so MaxBytes
// bounds the memory of sessions whatever clients do.
func TestFreedSessionReleasesPages(t *testing.T) {
	s := newServer(t, Options{})
	const size = 4 << 20
	c, a, mem, fd := openFD(t, s, fmt.Sprintf(`{"size":%d}`+"\n", size))
	if a.Error != nil {
		t.Fatal(a.Error)
	}
	defer unix.Close(fd)
	sess, release, err := s.Acquire(a.Session, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range sess.Bytes() {
		sess.Bytes()[i] = byte(i)
	}
	release()
	if got := allocated(t, fd); got < size {
		t.Fatalf("%d bytes allocated after writing %d", got, size)
	}
	if mem[size-1] != byte((size-1)%256) {
		t.Fatal("client does not see the server's write")
	}
	c.Close()
	waitSessions(t, s, 0)
	if got := allocated(t, fd); got != 0 {
		t.Fatalf("%d bytes still allocated after the session ended", got)
	}
}

// One owner's sessions stop at its quotas with an answer that says so;
// the others still get theirs, and the owner gets one again once it
// closes one.
func TestOwnerQuota(t *testing.T) {
	s := newServer(t, Options{MaxSessions: 8, MaxOwnerSessions: 2, MaxSessionBytes: 1 << 20, MaxBytes: 4 << 20, MaxOwnerBytes: 3 << 19,
		Authenticate: func(tok string) (string, any, error) { return tok, nil, nil }})
	ok := func(line string) *net.UnixConn {
		t.Helper()
		c, a, _ := open(t, s, line)
		if a.Error != nil {
			t.Fatalf("%q: %+v", line, a.Error)
		}
		return c
	}
	quota := func(line, what string) {
		t.Helper()
		_, a, _ := open(t, s, line)
		if a.Error == nil || a.Error.Code != "overloaded" || !strings.Contains(a.Error.Message, what) {
			t.Fatalf("%q: %+v, want overloaded naming %q", line, a.Error, what)
		}
	}
	first := ok(`{"token":"alpha","size":4096}` + "\n")
	ok(`{"token":"alpha","size":4096}` + "\n")
	quota(`{"token":"alpha","size":4096}`+"\n", "sessions")
	ok(`{"token":"beta","size":1048576}` + "\n")
	quota(`{"token":"beta","size":1048576}`+"\n", "bytes")
	ok(`{"token":"beta","size":4096}` + "\n")
	ok(`{"token":"gamma","size":1048576}` + "\n")
	if c := s.Counters(); c.QuotaRefusals != 2 {
		t.Fatalf("counters %+v", c)
	}
	first.Close()
	waitSessions(t, s, 4)
	ok(`{"token":"alpha","size":4096}` + "\n")
}
