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
	server.SetReadDeadline(time.Time{})
	client.Close()
	if n, err := r.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("after the peer closed: %d, %v; want io.EOF", n, err)
	}
}

// Connections without a raw socket get no Reader.
func TestReaderPipe(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if NewReader(a) != nil {
		t.Error("a Reader for a net.Pipe")
	}
}
