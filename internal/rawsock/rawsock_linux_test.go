package rawsock

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// A long value sent in slow, uneven pieces arrives whole, and a short
// message after it is read at once: the low-water mark raised for the value
// does not hold back what follows it.
func TestReaderLongThenShort(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw reads are linux only")
	}
	client, server := pair(t)
	r := NewReader(server)
	if r == nil {
		t.Fatal("no raw reader for a TCP connection")
	}
	value := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	go func() {
		for off := 0; off < len(value); {
			n := min(len(value)-off, 100_000+off%7919)
			client.Write(value[off : off+n])
			off += n
			time.Sleep(time.Millisecond)
		}
	}()
	got := make([]byte, len(value))
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, value) {
		t.Fatal("the value came back different")
	}
	if _, err := client.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	server.SetReadDeadline(time.Now().Add(2 * time.Second))
	small := make([]byte, 64)
	n, err := r.Read(small)
	if err != nil || string(small[:n]) != "PING\r\n" {
		t.Fatalf("short read after the value: %q, %v", small[:n], err)
	}
	if r.lowat != 0 {
		t.Errorf("SO_RCVLOWAT left at %d after a short read", r.lowat)
	}
}

// A read waiting for a long value that stalls ends at the connection's
// deadline, and one whose peer closes ends with io.EOF.
func TestReaderDeadlineAndEOF(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw reads are linux only")
	}
	client, server := pair(t)
	r := NewReader(server)
	client.Write(make([]byte, 1000))
	server.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 1<<20)
	total := 0
	var err error
	for err == nil {
		var n int
		n, err = r.Read(buf[total:])
		total += n
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) || total != 1000 {
		t.Fatalf("stalled value: %d bytes, %v; want 1000 and a deadline error", total, err)
	}
	// The low-water mark was raised for the rest of the read, on the
	// socket itself.
	var lowat int
	r.rc.Control(func(fd uintptr) { lowat, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT) })
	if r.lowat != len(buf)-1000 || lowat != r.lowat {
		t.Errorf("SO_RCVLOWAT %d, recorded %d; want %d", lowat, r.lowat, len(buf)-1000)
	}
	server.SetReadDeadline(time.Time{})
	client.Close()
	if n, err := r.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("after the peer closed: %d, %v; want io.EOF", n, err)
	}
}

// Connections without a raw socket get no Reader or Writer.
func TestReaderPipe(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if NewReader(a) != nil {
		t.Error("a Reader for a net.Pipe")
	}
	if NewWriter(a) != nil {
		t.Error("a Writer for a net.Pipe")
	}
}

// A write of several buffers, far larger than the socket buffers, to a
// peer that reads slowly takes many partial writevs and parks on a full
// socket between them; it arrives whole and byte for byte, and empty
// buffers among the others are skipped.
func TestWriterSlowReader(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw writes are linux only")
	}
	client, server := pair(t)
	w := NewWriter(server)
	if w == nil {
		t.Fatal("no raw writer for a TCP connection")
	}
	var bufs, want [][]byte
	for i := range 7 { // more buffers than one writev takes
		b := make([]byte, (3<<20)+i*7919)
		for j := range b {
			b[j] = byte(i*31 + j%251)
		}
		bufs = append(bufs, b, nil)
		want = append(want, b)
	}
	wantAll := bytes.Join(want, nil)
	done := make(chan error, 1)
	var n int64
	go func() {
		var err error
		n, err = w.Writev(bufs)
		done <- err
	}()
	got := make([]byte, 0, len(wantAll))
	buf := make([]byte, 200<<10)
	client.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := 0; len(got) < len(wantAll); i++ {
		m, err := client.Read(buf)
		got = append(got, buf[:m]...)
		if err != nil {
			t.Fatalf("after %d of %d bytes: %v", len(got), len(wantAll), err)
		}
		if i%8 == 0 {
			time.Sleep(time.Millisecond) // let the writer's socket fill up
		}
	}
	if err := <-done; err != nil || n != int64(len(wantAll)) {
		t.Fatalf("Writev: %d of %d bytes, %v", n, len(wantAll), err)
	}
	if !bytes.Equal(got, wantAll) {
		t.Fatal("the buffers came back different")
	}
	if m, err := w.Write([]byte("tail")); m != 4 || err != nil {
		t.Fatalf("Write after Writev: %d, %v", m, err)
	}
	if _, err := io.ReadFull(client, buf[:4]); err != nil || string(buf[:4]) != "tail" {
		t.Fatalf("tail: %q, %v", buf[:4], err)
	}
}

// A write to a peer that does not read ends at the write deadline with
// the bytes the socket took, a timeout error, and the rest of the buffers
// left unwritten in place; a write to a peer that closed fails rather
// than hangs.
func TestWriterDeadlineAndClosedPeer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw writes are linux only")
	}
	client, server := pair(t)
	w := NewWriter(server)
	big := make([]byte, 64<<20)
	bufs := [][]byte{big}
	server.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	start := time.Now()
	n, err := w.Writev(bufs)
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("write to a peer that does not read: %d bytes, %v; want a deadline error", n, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the deadline took %v", d)
	}
	if n <= 0 || n >= int64(len(big)) || int64(len(bufs[0])) != int64(len(big))-n {
		t.Fatalf("%d bytes written, %d left in the buffer, of %d", n, len(bufs[0]), len(big))
	}
	server.SetWriteDeadline(time.Time{})
	client.Close()
	done := make(chan error, 1)
	go func() {
		var err error
		for range 100 {
			if _, err = w.Write(big[:1<<20]); err != nil {
				break
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("100 MiB written to a closed peer without an error")
		}
		var oe *net.OpError
		if !errors.As(err, &oe) || oe.Op != "writev" {
			t.Errorf("closed peer: %v; want a writev OpError", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write to a closed peer hung")
	}
}

// A write on a connection closed locally while it waits for room ends
// with net.ErrClosed.
func TestWriterLocalClose(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw writes are linux only")
	}
	_, server := pair(t)
	w := NewWriter(server)
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(make([]byte, 64<<20))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	server.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("write on a closed connection: %v; want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a parked write")
	}
}

// TestFD: ReadFD and WriteFD on a non-blocking socket descriptor move the
// bytes, answer EAGAIN as the bare errno when there is nothing to read or
// no room to write, and 0 bytes with no error at the peer's EOF.
func TestFD(t *testing.T) {
	c, s := pair(t)
	f, err := s.(*net.TCPConn).File() // a blocking duplicate: made non-blocking below
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := ReadFD(fd, buf); err != unix.EAGAIN {
		t.Fatalf("read of an empty socket: %v, want EAGAIN", err)
	}
	if n, err := ReadFD(fd, nil); n != 0 || err != nil {
		t.Fatalf("empty read: %d %v", n, err)
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var n int
	for err = unix.EAGAIN; err == unix.EAGAIN && time.Now().Before(deadline); {
		n, err = ReadFD(fd, buf)
	}
	if err != nil || string(buf[:n]) != "PING\r\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	// The peer does not read: writes fill the socket, then EAGAIN.
	big := bytes.Repeat([]byte("x"), 1<<20)
	total := 0
	for range 1 << 10 {
		n, err := WriteFD(fd, big)
		total += n
		if err == unix.EAGAIN {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if total == 0 || total >= 1<<30 {
		t.Fatalf("wrote %d bytes before EAGAIN", total)
	}
	got, err := io.ReadAll(io.LimitReader(c, int64(total)))
	if err != nil || len(got) != total || bytes.Count(got, []byte("x")) != total {
		t.Fatalf("peer read %d of %d bytes: %v", len(got), total, err)
	}
	c.Close()
	for err, n = unix.EAGAIN, -1; err == unix.EAGAIN && time.Now().Before(deadline); {
		n, err = ReadFD(fd, buf)
	}
	if n != 0 || err != nil {
		t.Fatalf("read at EOF: %d %v, want 0 and no error", n, err)
	}
}

// TestNoAllocs: a short write and its read allocate nothing, since their
// poller callbacks are bound once, not made per call; each runs on every
// request of the connections that use them.
func TestNoAllocs(t *testing.T) {
	c, s := pair(t)
	w, r := NewWriter(c), NewReader(s)
	msg := []byte("+OK\r\n")
	buf := make([]byte, 64)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := w.Write(msg); err != nil {
			t.Fatal(err)
		}
		if n, err := io.ReadFull(r, buf[:len(msg)]); err != nil || n != len(msg) {
			t.Fatalf("read %d: %v", n, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per write and read, want 0", allocs)
	}
}
