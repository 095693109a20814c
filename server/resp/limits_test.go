package resp

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Bad and absurd input: each case gets an error reply, or its connection
// is closed after a protocol error, while another connection keeps
// working and the stored data stays intact.
func TestBadInput(t *testing.T) {
	s := startServer(t, Options{MaxValueSize: 1 << 20, MaxBulkLen: 4 << 20, MaxRequestBytes: 64 << 10})
	other := dial(t, s.addr)
	if got := other.do("SET", "keep", "safe"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	closes := []struct {
		name, req, want string
	}{
		{"absurd multibulk", "*99999999999\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"multibulk over MaxArgs", "*2000000\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"negative bulk", "*1\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"absurd bulk", "*2\r\n$3\r\nGET\r\n$10000000000\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk over MaxBulkLen", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5000000\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"not a bulk", "*1\r\n:12\r\n", "-ERR Protocol error: expected '$', got ':'\r\n"},
		{"bad count", "*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"LF only", "*1\n", "-ERR Protocol error: expected CRLF line ending\r\n"},
		{"unterminated bulk", "*1\r\n$4\r\nPINGxx", "-ERR Protocol error: bulk string not terminated by CRLF\r\n"},
		{"unbalanced quotes", "SET \"a b\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		{"long count line", "*" + strings.Repeat("1", 70000) + "\r\n", "-ERR Protocol error: too big count string\r\n"},
		{"long inline", strings.Repeat("x", 70000) + "\r\n", "-ERR Protocol error: too big inline request\r\n"},
	}
	for _, tc := range closes {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s.addr)
			c.send(tc.req)
			if got := c.reply(); got != tc.want {
				t.Errorf("reply %q, want %q", got, tc.want)
			}
			if !c.closed() {
				t.Error("connection not closed after a protocol error")
			}
			if got := other.do("GET", "keep"); got != "$4\r\nsafe\r\n" {
				t.Errorf("the other connection reads %q", got)
			}
		})
	}

	t.Run("value over MaxValueSize is refused before it is read", func(t *testing.T) {
		c := dial(t, s.addr)
		c.send("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n") // no value sent yet
		if got, want := c.reply(), "-ERR value of 2000000 bytes is larger than the maximum of 1048576\r\n"; got != want {
			t.Fatalf("reply %q, want %q", got, want)
		}
		// The value is skipped without being stored; the connection
		// stays in step.
		c.send(strings.Repeat("v", 2000000) + "\r\n" + multibulk("PING"))
		if got := c.reply(); got != "+PONG\r\n" {
			t.Fatalf("after the refused value: %q", got)
		}
		if got := c.do("EXISTS", "k"); got != ":0\r\n" {
			t.Errorf("EXISTS k = %q", got)
		}
	})

	sane := []struct {
		name string
		args []string
		want string
	}{
		{"long key", []string{"GET", strings.Repeat("k", 100<<10)}, "-ERR the arguments of 'get' exceed the limit of 65536 bytes buffered per command (65536 per argument)\r\n"},
		{"many keys", append([]string{"MGET"}, strings.Fields(strings.Repeat("key ", 20000))...), "-ERR the arguments of 'mget' exceed the limit of 65536 bytes buffered per command (65536 per argument)\r\n"},
		{"key over the record limit", []string{"SET", strings.Repeat("k", 600), "v"}, "-ERR key of 600 bytes is longer than the 479 bytes allowed\r\n"},
		{"streamed key", []string{"SET", strings.Repeat("k", 70000), "v"}, "-ERR key of 70000 bytes is longer than the 479 bytes allowed\r\n"},
		{"long unknown command", []string{strings.Repeat("X", 70000), "a"}, "-ERR unknown command, with a name of 70000 bytes\r\n"},
		{"long ECHO", []string{"ECHO", strings.Repeat("e", 70000)}, "-ERR the arguments of 'echo' exceed the limit of 65536 bytes buffered per command (65536 per argument)\r\n"},
	}
	for _, tc := range sane {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s.addr)
			if got := c.do(tc.args...); got != tc.want {
				t.Errorf("reply %q, want %q", got, tc.want)
			}
			if got := c.do("GET", "keep"); got != "$4\r\nsafe\r\n" {
				t.Errorf("then GET keep = %q", got)
			}
		})
	}
}

// TestUnauthenticatedLimits: before AUTH a client may send only small
// requests, as with Redis.
func TestUnauthenticatedLimits(t *testing.T) {
	s := startServer(t, Options{Tokens: writeTokens(t, "alpha-token-0123456789: {tenant: alpha, role: tenant}\n")})
	c := dial(t, s.addr)
	c.send("*11\r\n")
	if got, want := c.reply(), "-ERR Protocol error: unauthenticated multibulk length\r\n"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	c = dial(t, s.addr)
	c.send("*2\r\n$4\r\nAUTH\r\n$20000\r\n")
	if got, want := c.reply(), "-ERR Protocol error: unauthenticated bulk length\r\n"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	c = dial(t, s.addr)
	if got := c.do("AUTH", "alpha-token-0123456789"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	big := strings.Repeat("v", 20000)
	if got := c.do("SET", "k", big); got != "+OK\r\n" {
		t.Errorf("after AUTH, a 20000-byte SET: %q", got)
	}
}

func TestMaxConns(t *testing.T) {
	s := startServer(t, Options{MaxConns: 2})
	a, b := dial(t, s.addr), dial(t, s.addr)
	a.do("PING")
	b.do("PING")
	c := dial(t, s.addr)
	if got := c.reply(); got != "-ERR max number of clients reached\r\n" {
		t.Errorf("third connection: %q", got)
	}
	if !c.closed() {
		t.Error("third connection not closed")
	}
	if got := a.do("PING"); got != "+PONG\r\n" {
		t.Errorf("first connection: %q", got)
	}
	if st := s.Stats(); st.RejectedConns != 1 || st.ConnectedClients != 2 {
		t.Errorf("stats: %+v", st)
	}
}

// TestStalledClients: a client that stops reading its replies, or stops
// sending a value it started, is disconnected after StallTimeout, and what
// it held in the store (pins, a reserved value) is given back. The cases
// run in synctest bubbles over in-memory connections: the stall deadlines
// run on the bubble's clock, so the waits below pass them at once.
func TestStalledClients(t *testing.T) {
	// Each case runs in a bubble of its own (t.Run cannot be called in one)
	// with a server holding one 1 MiB value.
	setup := func(t *testing.T) (s *testServer, ln *pipeListener, w *rawConn, used func() int64) {
		s, ln = startBubbleServer(t, Options{StallTimeout: 300 * time.Millisecond})
		w = ln.dial(t)
		if got := w.do("SET", "big", strings.Repeat("x", 1<<20)); got != "+OK\r\n" {
			t.Fatal(got)
		}
		return s, ln, w, func() int64 { return s.store.Stats().Tiers[0].Used }
	}
	t.Run("reader", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, ln, w, used := setup(t)
			base := used()
			c := ln.dial(t)
			// Far more replies than any buffer holds, never read. The
			// writes end when the server hangs up.
			go io.WriteString(c.nc, strings.Repeat(multibulk("GET", "big"), 64))
			waitFor(t, 10*time.Second, func() bool { return s.Stats().ConnectedClients == 2 })
			waitFor(t, 10*time.Second, func() bool { return s.Stats().ConnectedClients == 1 })
			// What was in flight arrives, then the end of the connection.
			c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := io.Copy(io.Discard, c.nc); n >= 64<<20 {
				t.Errorf("the stalled reader got all %d bytes (%v)", n, err)
			}
			if got := w.do("DEL", "big"); got != ":1\r\n" {
				t.Fatalf("DEL: %q", got)
			}
			// With the stalled pins gone the block's space is reclaimed.
			waitFor(t, 5*time.Second, func() bool { return used() < base })
			if got := w.do("SET", "big", strings.Repeat("x", 1<<20)); got != "+OK\r\n" {
				t.Fatal(got)
			}
		})
	})
	t.Run("writer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, ln, w, used := setup(t)
			before := used()
			c := ln.dial(t)
			c.send(fmt.Sprintf("*3\r\n$3\r\nSET\r\n$3\r\nnew\r\n$%d\r\n", 8<<20) + strings.Repeat("y", 1<<20))
			waitFor(t, 5*time.Second, func() bool { return used() >= before+8<<20 }) // reserved
			waitFor(t, 10*time.Second, func() bool { return used() < before+8<<20 }) // given back
			if !c.closed() {
				t.Error("stalled writer not disconnected")
			}
			if got := w.do("EXISTS", "new"); got != ":0\r\n" {
				t.Errorf("EXISTS new = %q", got)
			}
		})
	})
}

func waitFor(t testing.TB, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInline: the inline form (telnet, "redis-cli" muscle memory) with
// Redis's quoting.
func TestInline(t *testing.T) {
	s := startServer(t, Options{})
	c := dial(t, s.addr)
	c.send("PING\r\n\r\nSET k \"a b\\x41\\n\"\r\nGET k\nSET 'it\\'s' x\r\nGET \"it's\"\r\nMSET p 1 q 2\r\nMGET p q\r\n")
	for _, want := range []string{"+PONG\r\n", "+OK\r\n", "$5\r\na bA\n\r\n", "+OK\r\n", "$1\r\nx\r\n", "+OK\r\n", "*2\r\n$1\r\n1\r\n$1\r\n2\r\n"} {
		if got := c.reply(); got != want {
			t.Errorf("reply %q, want %q", got, want)
		}
	}
}

// TestLargeValues: values that stream into the store, in DRAM and beyond
// it in SSD, read back byte for byte, also pipelined.
func TestLargeValues(t *testing.T) {
	s := startServer(t, Options{Store: testStore(t, 32<<20, 128<<20)})
	c := dial(t, s.addr)
	sizes := []int{smallArg, smallArg + 1, 1 << 20, 4<<20 + 3, 40 << 20} // the last beyond DRAM's largest block
	if testing.Short() {
		sizes = sizes[:4]
	}
	for i, n := range sizes {
		v := bytes.Repeat([]byte{byte(i), byte(i * 7), '\r', '\n'}, n/4+1)[:n]
		key := fmt.Sprintf("v%d", n)
		if got := c.do("SET", key, string(v), "PX", "100000"); got != "+OK\r\n" {
			t.Fatalf("SET %d bytes: %q", n, got)
		}
		if got := c.do("GET", key); got != fmt.Sprintf("$%d\r\n%s\r\n", n, v) {
			t.Fatalf("GET %d bytes: %d bytes back, differ", n, len(got))
		}
		if got := c.do("GETRANGE", key, "1", "3"); got != fmt.Sprintf("$3\r\n%s\r\n", v[1:4]) {
			t.Errorf("GETRANGE: %q", got)
		}
		// Slow under the race detector: the deadline runs while the
		// value is read back.
		var ttl int
		got := c.do("TTL", key)
		fmt.Sscanf(got, ":%d\r\n", &ttl)
		if ttl < 90 || ttl > 100 {
			t.Errorf("TTL after a SET with PX 100000: %q", got)
		}
	}
	// Pipelined: several streamed SETs and GETs in one write.
	v := strings.Repeat("p", 200<<10)
	var req strings.Builder
	for i := range 8 {
		req.WriteString(multibulk("SET", fmt.Sprint("p", i), v))
		req.WriteString(multibulk("GET", fmt.Sprint("p", i)))
	}
	c.send(req.String())
	for i := range 8 {
		if got := c.reply(); got != "+OK\r\n" {
			t.Fatalf("pipelined SET %d: %q", i, got)
		}
		if got := c.reply(); got != fmt.Sprintf("$%d\r\n%s\r\n", len(v), v) {
			t.Fatalf("pipelined GET %d differs", i)
		}
	}
	// MSET streams each long value.
	if got := c.do("MSET", "m1", v, "m2", "short", "m3", v); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := c.do("STRLEN", "m3"); got != fmt.Sprintf(":%d\r\n", len(v)) {
		t.Errorf("STRLEN m3 = %q", got)
	}
}

// TestLongReplies: a reply far larger than the output buffer (MGET of
// many values, KEYS of many keys) is written out as it is produced.
func TestLongReplies(t *testing.T) {
	s := startServer(t, Options{})
	c := dial(t, s.addr)
	v := strings.Repeat("m", 4000)
	n := 2000 // 8 MB of MGET reply
	var req strings.Builder
	args := []string{"MGET"}
	for i := range n {
		k := fmt.Sprint("m", i)
		req.WriteString(multibulk("SET", k, v))
		args = append(args, k)
	}
	c.send(req.String())
	for range n {
		if got := c.reply(); got != "+OK\r\n" {
			t.Fatal(got)
		}
	}
	c.send(multibulk(args...))
	got := c.reply()
	if want := fmt.Sprintf("*%d\r\n", n) + strings.Repeat(fmt.Sprintf("$%d\r\n%s\r\n", len(v), v), n); got != want {
		t.Fatalf("MGET reply of %d bytes, want %d", len(got), len(want))
	}
	if got := c.do("KEYS", "m1*"); !strings.HasPrefix(got, "*1111\r\n") {
		t.Errorf("KEYS m1*: %.20q", got)
	}
	if st := s.Stats(); st.ErrorReplies != 0 {
		t.Errorf("%d error replies", st.ErrorReplies)
	}
}

func TestOptionsValidate(t *testing.T) {
	st := testStore(t, 1<<20, 1<<20)
	defer st.Close()
	f := func(o Options, want ...string) {
		t.Helper()
		o.EnsureDefaults()
		err := o.Validate()
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Validate() = %v, want it to mention %q", err, w)
			}
		}
		if len(want) == 0 && err != nil {
			t.Errorf("Validate() = %v", err)
		}
	}
	f(Options{Store: st})
	f(Options{}, "Store is required")
	f(Options{Store: st, Namespace: func(t string) string { return "other/redis" }}, "another tenant")
	f(Options{Store: st, Namespace: func(t string) string { return t }}, "Namespace")
	f(Options{Store: st, Namespace: func(t string) string { return t + "/" + strings.Repeat("m", 200) + "#" + strings.Repeat("s", 100) }}, "leaves")
	// Every problem at once.
	f(Options{Store: st, MaxValueSize: 1 << 40, MaxBulkLen: 1, MaxRequestBytes: 10, MaxConns: -1, StallTimeout: -1},
		"MaxValueSize", "MaxBulkLen", "MaxRequestBytes", "MaxConns", "StallTimeout")
}

// TestValuesBypassHeap: SET streams a long value from the socket into the
// store's off-heap arena and GET writes it from there, so moving 100 MiB
// through the server allocates a small fraction of that on the Go heap.
func TestValuesBypassHeap(t *testing.T) {
	s := startServer(t, Options{})
	c := dial(t, s.addr)
	const size, rounds = 1 << 20, 100
	set := []byte(multibulk("SET", "v", strings.Repeat("z", size)))
	get := []byte(multibulk("GET", "v"))
	var m0, m1 runtime.MemStats
	measure := func(name string, req []byte, read func()) {
		t.Helper()
		runtime.ReadMemStats(&m0)
		for range rounds {
			if _, err := c.nc.Write(req); err != nil {
				t.Fatal(err)
			}
			read()
		}
		runtime.ReadMemStats(&m1)
		if d := m1.TotalAlloc - m0.TotalAlloc; d > rounds*size/10 {
			t.Errorf("%d %s of %d bytes allocated %d bytes on the heap", rounds, name, size, d)
		}
	}
	measure("SETs", set, func() {
		if got := c.reply(); got != "+OK\r\n" {
			t.Fatal(got)
		}
	})
	measure("GETs", get, func() {
		line, err := c.br.ReadSlice('\n')
		if err != nil || string(line) != fmt.Sprintf("$%d\r\n", size) {
			t.Fatalf("%q %v", line, err)
		}
		if _, err := c.br.Discard(size + 2); err != nil {
			t.Fatal(err)
		}
	})
}
