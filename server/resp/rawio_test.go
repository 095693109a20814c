package resp

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// TestTrickledValue: a long value that arrives in small pieces, with pauses
// between them, is stored whole, and a short command after it is answered
// at once: the receive low-water mark raised for the value (rawio_linux.go)
// must never ask for more than the value's unread bytes, nor outlive it.
func TestTrickledValue(t *testing.T) {
	s := startServer(t, Options{StallTimeout: 5 * time.Second})
	c := dial(t, s.addr)
	const n = 3<<20 + 5
	v := bytes.Repeat([]byte("abc\r\ndefg"), n/9+1)[:n]
	req := []byte(multibulk("SET", "trickled", string(v)))
	// Uneven pieces, so that the server's reads end at every kind of
	// boundary: inside the header, inside the value, inside the CRLF.
	for off, i := 0, 0; off < len(req); i++ {
		end := min(off+[]int{7, 37 << 10, 300 << 10, 1}[i%4], len(req))
		c.send(string(req[off:end]))
		off = end
		if i%8 == 0 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	if got := c.reply(); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	start := time.Now()
	if got := c.do("STRLEN", "trickled"); got != fmt.Sprintf(":%d\r\n", n) {
		t.Fatalf("STRLEN: %q", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a 17-byte command after a long value took %v", d)
	}
	if got := c.do("GET", "trickled"); got != fmt.Sprintf("$%d\r\n%s\r\n", n, v) {
		t.Fatalf("GET: %d bytes back, differ", len(got))
	}
	// Pipelined behind a long value, in the same write as its tail.
	c.send(multibulk("SET", "k2", string(v[:1<<20])) + multibulk("PING"))
	if got := c.reply(); got != "+OK\r\n" {
		t.Fatalf("SET k2: %q", got)
	}
	if got := c.reply(); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
}

// TestStalledValueOverTCP: a client that stops halfway through a long value
// over a real socket, where the server waits with its low-water mark
// raised, is still cut off after StallTimeout, and what was reserved for
// the value is given back.
func TestStalledValueOverTCP(t *testing.T) {
	s := startServer(t, Options{StallTimeout: 300 * time.Millisecond})
	used := func() int64 { return s.store.Stats().Tiers[0].Used }
	before := used()
	c := dial(t, s.addr)
	c.send(fmt.Sprintf("*3\r\n$3\r\nSET\r\n$5\r\nstall\r\n$%d\r\n", 8<<20) + strings.Repeat("y", 1<<20))
	waitFor(t, 5*time.Second, func() bool { return used() >= before+8<<20 })
	waitFor(t, 10*time.Second, func() bool { return used() < before+8<<20 })
	if !c.closed() {
		t.Error("stalled writer not disconnected")
	}
	w := dial(t, s.addr)
	if got := w.do("EXISTS", "stall"); got != ":0\r\n" {
		t.Errorf("EXISTS stall = %q", got)
	}
}

// TestSlowReaderOverTCP: a GET of a value larger than the socket buffers
// takes many partial writes when the client reads slowly; the reply
// arrives whole and byte for byte, and the connection serves on.
func TestSlowReaderOverTCP(t *testing.T) {
	s := startServer(t, Options{StallTimeout: 5 * time.Second})
	c := dial(t, s.addr)
	const n = 24 << 20
	v := bytes.Repeat([]byte{1, 2, 3, '\r', '\n', 4, 5}, n/7+1)[:n]
	if got := c.do("SET", "big", string(v)); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	c.send(multibulk("GET", "big") + multibulk("PING"))
	want := append(fmt.Appendf(nil, "$%d\r\n", n), v...)
	want = append(want, "\r\n+PONG\r\n"...)
	got := make([]byte, 0, len(want))
	buf := make([]byte, 256<<10)
	c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := 0; len(got) < len(want); i++ {
		m, err := c.br.Read(buf)
		got = append(got, buf[:m]...)
		if err != nil && err != io.EOF {
			t.Fatalf("after %d of %d bytes: %v", len(got), len(want), err)
		}
		if err == io.EOF {
			break
		}
		if i%16 == 0 {
			time.Sleep(time.Millisecond) // let the server's socket fill up
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("GET then PING: %d bytes back of %d, differ", len(got), len(want))
	}
}
