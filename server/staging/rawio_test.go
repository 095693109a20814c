package staging

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketPair is a connected pair of unix stream sockets: the server's
// end, read through an fdConn, and the client's.
func socketPair(t *testing.T) (srv *net.UnixConn, cli *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// The raw recvmsg reads bytes and keeps the descriptors sent with them,
// as ReadMsgUnix did: at most max unclaimed (older ones closed), a
// message with more than there is room for truncated by the kernel
// without leaking any, and the end of the stream is io.EOF.
func TestFDConnRawRead(t *testing.T) {
	srv, cli := socketPair(t)
	f := newFDConn(srv, 2)
	if f.rc == nil {
		t.Fatal("no raw connection: the raw read path is not tested")
	}
	defer f.close()
	mfd, _ := memfd(t, 4096, 0)
	var want unix.Stat_t
	if err := unix.Fstat(mfd, &want); err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)

	buf := make([]byte, 64)
	if _, _, err := cli.WriteMsgUnix([]byte("one\n"), unix.UnixRights(mfd), nil); err != nil {
		t.Fatal(err)
	}
	n, err := f.Read(buf)
	if err != nil || string(buf[:n]) != "one\n" {
		t.Fatalf("read %q %v", buf[:n], err)
	}
	fd := f.take()
	var got unix.Stat_t
	if fd < 0 || unix.Fstat(fd, &got) != nil || got.Ino != want.Ino {
		t.Fatalf("descriptor %d: not the memfd sent", fd)
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("descriptor taken without close-on-exec: %v %v", flags, err)
	}
	unix.Close(fd)

	// Eight in one message: the control buffer has room for maxFDs, the
	// kernel closes the rest, and the fdConn keeps its max.
	eight := []int{mfd, mfd, mfd, mfd, mfd, mfd, mfd, mfd}
	if _, _, err := cli.WriteMsgUnix([]byte("two\n"), unix.UnixRights(eight...), nil); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Read(buf); err != nil || string(buf[:n]) != "two\n" {
		t.Fatalf("read %q %v", buf[:n], err)
	}
	if len(f.fds) != 2 {
		t.Fatalf("%d descriptors kept, want 2", len(f.fds))
	}
	if got := openFDs(t); got != before+2 {
		t.Fatalf("%d descriptors open, want %d: the rest leaked", got, before+2)
	}
	f.close()
	if got := openFDs(t); got != before {
		t.Fatalf("%d descriptors open after close, want %d", got, before)
	}

	// A half line then the end: bufio sees the bytes, then io.EOF.
	cli.Write([]byte("half"))
	cli.CloseWrite()
	r := bufio.NewReader(f)
	if line, err := r.ReadString('\n'); line != "half" || err != io.EOF {
		t.Fatalf("half line: %q %v", line, err)
	}
}

// A read waiting on the raw path still ends at its deadline and when the
// connection is closed, as one in ReadMsgUnix did.
func TestFDConnRawReadUnblocks(t *testing.T) {
	srv, _ := socketPair(t)
	f := newFDConn(srv, 2)
	buf := make([]byte, 16)
	srv.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var ne net.Error
	if _, err := f.Read(buf); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("past the deadline: %v, want a timeout", err)
	}
	srv.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := f.Read(buf)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	srv.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a waiting read")
	}
}

// One raw read allocates nothing: the callback and recvmsg's arguments
// live in the fdConn.
func TestFDConnRawReadAllocs(t *testing.T) {
	srv, cli := socketPair(t)
	f := newFDConn(srv, 2)
	buf := make([]byte, 64)
	msg := []byte("x\n")
	allocs := testing.AllocsPerRun(100, func() {
		cli.Write(msg)
		if _, err := f.Read(buf); err != nil {
			t.Fatal(err)
		}
	})
	// The client's Write is net.Conn's, which allocates nothing either.
	if allocs != 0 {
		t.Fatalf("%v allocations a read, want 0", allocs)
	}
}

// Answers are whole lines in order however many requests a client
// pipelines, and a client that sends requests but never reads its
// answers (the server's writes park on a full socket) does not keep
// Close from returning.
func TestAnswersToPipelinedAndStuckClients(t *testing.T) {
	big := bytes.Repeat([]byte("a"), 256<<10)
	s := newServer(t, Options{MaxRequestBytes: 1 << 10, Handle: func(_ context.Context, _ *Session, line []byte) []byte {
		if bytes.HasPrefix(line, []byte("big")) {
			return big
		}
		return append([]byte("re:"), bytes.TrimSpace(line)...)
	}})
	c, a, _ := open(t, s, `{"size":4096}`+"\n")
	if a.Error != nil {
		t.Fatal(a.Error)
	}
	var reqs strings.Builder
	for i := range 200 {
		reqs.WriteString(strings.Repeat("q", i%7+1) + "\n")
	}
	go c.Write([]byte(reqs.String()))
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range 200 {
		line, err := r.ReadString('\n')
		if want := "re:" + strings.Repeat("q", i%7+1) + "\n"; err != nil || line != want {
			t.Fatalf("answer %d: %q %v, want %q", i, line, err, want)
		}
	}

	stuck, a, _ := open(t, s, `{"size":4096}`+"\n")
	if a.Error != nil {
		t.Fatal(a.Error)
	}
	stuck.SetWriteDeadline(time.Now().Add(2 * time.Second))
	for range 64 {
		if _, err := stuck.Write([]byte("big\n")); err != nil {
			break // the server stopped reading: its answer writes are stuck
		}
	}
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with a session stuck writing its answers")
	}
}
