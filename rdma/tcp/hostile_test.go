package tcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/rdmatest"
	"github.com/yuebing/yuebing/rdma/wire"
)

// rawClient speaks the framing by hand over a real connection, to send what
// a correct client never would.
type rawClient struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
	v  uint8
	id uint64
}

func dialRaw(t *testing.T, addr string, token string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
	if token != "" {
		conn, err := wire.ClientHello(nc, c.br, []byte(token), 42)
		if err != nil {
			t.Fatalf("hello: %v", err)
		}
		c.v, c.id = conn.Version, conn.ID
	}
	return c
}

func (c *rawClient) send(h wire.Header, payload []byte) {
	c.t.Helper()
	h.Version = c.v
	if err := wire.WriteFrame(c.nc, h, payload); err != nil {
		c.t.Fatal(err)
	}
}

// expect reads one answer and returns its payload (with the trailer, for
// a data frame).
func (c *rawClient) expect(typ wire.Type, code wire.Code) (wire.Header, []byte) {
	c.t.Helper()
	h, err := wire.ReadHeader(c.br, make([]byte, wire.HeaderSize))
	if err != nil {
		c.t.Fatalf("want %s: %v", typ, err)
	}
	n := int(h.Length)
	if h.Type.IsData() {
		n += wire.TrailerSize
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(c.br, p); err != nil {
		c.t.Fatal(err)
	}
	if h.Type != typ || h.Code != code {
		c.t.Fatalf("got %s code %d (%q), want %s code %d", h.Type, h.Code, p, typ, code)
	}
	return h, p
}

// expectClosed reads until the server closes the connection. A reset
// counts: closing a socket with unread input makes the kernel send RST.
func (c *rawClient) expectClosed() {
	c.t.Helper()
	if _, err := io.Copy(io.Discard, c.br); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		c.t.Fatalf("connection not closed: %v", err)
	}
}

// synced returns the segment's memory once every access a peer made
// through the transport is visible: the pin's lock orders them, which a
// socket, to the race detector, does not.
func synced(t *testing.T, e *rdma.Engine, seg *rdma.Segment) []byte {
	t.Helper()
	pinned, err := e.Segments().Acquire(seg.ID())
	if err != nil {
		t.Fatal(err)
	}
	pinned.Release()
	return seg.Bytes()
}

type served struct {
	tr  *Transport
	e   *rdma.Engine
	mem []byte
	seg *rdma.Segment
}

func newServed(t *testing.T) *served {
	s := &served{tr: newTransport(t, Options{Topology: loopbackTopology(41, 1), MaxSliceSize: 1 << 20})}
	s.e = newEngine(t, s.tr)
	s.mem = make([]byte, 4<<20)
	fill(rand.New(rand.NewPCG(3, 4)), s.mem)
	var err error
	if s.seg, err = s.e.Register("kv", "cpu:0", s.mem); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestServerRejectsOutOfBounds sends requests past the segment's end, for
// unknown segments and over the slice limit; each is refused with the right
// code, memory is untouched, and the connection keeps working.
func TestServerRejectsOutOfBounds(t *testing.T) {
	s := newServed(t)
	before := bytes.Clone(s.mem)
	c := dialRaw(t, s.e.Addr(), rdmatest.Token)
	id := s.seg.ID()
	size := uint64(len(s.mem))
	for _, tc := range []struct {
		name string
		h    wire.Header
		body []byte
		code wire.Code
	}{
		{"read past end", wire.Header{Type: wire.Read, Segment: id, Offset: size - 10, Length: 11}, nil, wire.CodeOutOfRange},
		{"read offset overflow", wire.Header{Type: wire.Read, Segment: id, Offset: 1<<64 - 1, Length: 2}, nil, wire.CodeOutOfRange},
		{"read unknown segment", wire.Header{Type: wire.Read, Segment: id + 1, Length: 1}, nil, wire.CodeNotFound},
		{"read over slice limit", wire.Header{Type: wire.Read, Segment: id, Length: 1<<20 + 1}, nil, wire.CodeProtocol},
		{"read zero", wire.Header{Type: wire.Read, Segment: id}, nil, wire.CodeProtocol},
		{"write past end", wire.Header{Type: wire.Write, Segment: id, Offset: size - 2}, []byte("abcd"), wire.CodeOutOfRange},
		{"write unknown segment", wire.Header{Type: wire.Write, Segment: 12345}, []byte("abcd"), wire.CodeNotFound},
	} {
		tc.h.ID = 77
		if tc.h.Type == wire.Read {
			// WriteFrame sets Length from the payload; a Read carries none,
			// so encode its header by hand.
			tc.h.Version = c.v
			var b [wire.HeaderSize]byte
			tc.h.Put(b[:])
			if _, err := c.nc.Write(b[:]); err != nil {
				t.Fatal(err)
			}
		} else {
			c.send(tc.h, tc.body)
		}
		h, msg := c.expect(wire.Error, tc.code)
		if h.ID != 77 {
			t.Errorf("%s: answer for request %d", tc.name, h.ID)
		}
		t.Logf("%s: %s", tc.name, msg)
	}
	// A bad CRC on a write is reported too (the bytes landed, but the
	// request failed).
	h := wire.Header{Version: c.v, Type: wire.Write, ID: 78, Segment: id, Offset: 0, Length: 4}
	var b [wire.HeaderSize]byte
	h.Put(b[:])
	c.nc.Write(append(b[:], "abcd\x01\x00\x00\x00"...)) // payload and a wrong trailer
	c.expect(wire.Error, wire.CodeChecksum)
	copy(before, "abcd")
	if !bytes.Equal(before, synced(t, s.e, s.seg)) {
		t.Fatal("refused requests changed memory")
	}
	// Still in sync: a good read returns the right bytes.
	hr := wire.Header{Version: c.v, Type: wire.Read, ID: 79, Segment: id, Offset: 100, Length: 1000}
	hr.Put(b[:])
	c.nc.Write(b[:])
	rh, p := c.expect(wire.ReadData, 0)
	if rh.ID != 79 || len(p) != 1000+wire.TrailerSize || !bytes.Equal(p[:1000], s.mem[100:1100]) ||
		block.Checksum(p[:1000]) != binary.LittleEndian.Uint32(p[1000:]) {
		t.Fatal("read after refusals returned wrong bytes")
	}
}

// TestGarbageDoesNotHarmOthers runs a transfer loop while peers send
// garbage, truncated frames and frames beyond the limits; each bad peer is
// disconnected, and the good transfers finish with the right bytes.
func TestGarbageDoesNotHarmOthers(t *testing.T) {
	s := newServed(t)
	client := newEngine(t, newTransport(t, Options{Topology: loopbackTopology(42, 1), SliceSize: 64 << 10}))
	local := make([]byte, len(s.mem))
	lseg, err := client.Register("buf", "cpu:0", local)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := client.OpenSegment(t.Context(), s.e.Addr(), "kv")
	if err != nil {
		t.Fatal(err)
	}
	// The good transfers read [1 MiB, 4 MiB); the bad peers write at 0.
	const from = 1 << 20
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var rounds atomic.Int64
	failed := make(chan error, 1)
	wg.Go(func() {
		for ctx.Err() == nil {
			clear(local)
			b, err := client.AllocateBatch(1)
			if err != nil {
				failed <- err
				return
			}
			b.Submit(t.Context(), rdma.Request{Op: rdma.Read, Local: lseg, LocalOffset: from, Remote: remote, RemoteOffset: from, Length: uint64(len(local) - from)})
			st, _ := b.Wait(t.Context())
			b.Free()
			if st.State != rdma.Completed || !bytes.Equal(local[from:], s.mem[from:]) {
				failed <- errors.Join(errors.New("good transfer failed"), st.Err)
				return
			}
			rounds.Add(1)
		}
	})

	rng := rand.New(rand.NewPCG(5, 6))
	junk := make([]byte, 64<<10)
	fill(rng, junk)
	bad := []struct {
		name  string
		hello bool
		send  func(c *rawClient)
	}{
		{"garbage before hello", false, func(c *rawClient) { c.nc.Write(junk) }},
		{"http before hello", false, func(c *rawClient) { c.nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) }},
		{"garbage after hello", true, func(c *rawClient) { c.nc.Write(junk) }},
		{"truncated header", true, func(c *rawClient) {
			var b [wire.HeaderSize]byte
			(&wire.Header{Version: c.v, Type: wire.Read, Segment: s.seg.ID(), Length: 10}).Put(b[:])
			c.nc.Write(b[:20])
		}},
		{"truncated write payload", true, func(c *rawClient) {
			var b [wire.HeaderSize]byte
			(&wire.Header{Version: c.v, Type: wire.Write, Segment: s.seg.ID(), Length: 65536}).Put(b[:])
			c.nc.Write(append(b[:], junk[:100]...))
		}},
		{"write over slice limit", true, func(c *rawClient) {
			var b [wire.HeaderSize]byte
			(&wire.Header{Version: c.v, Type: wire.Write, Segment: s.seg.ID(), Length: 1<<32 - 1}).Put(b[:])
			c.nc.Write(b[:])
		}},
		{"wrong version", true, func(c *rawClient) {
			var b [wire.HeaderSize]byte
			(&wire.Header{Version: c.v + 1, Type: wire.Read, Segment: s.seg.ID(), Length: 1}).Put(b[:])
			c.nc.Write(b[:])
		}},
		{"server frame from client", true, func(c *rawClient) { c.send(wire.Header{Type: wire.ReadData}, []byte("x")) }},
		{"second hello", true, func(c *rawClient) {
			c.send(wire.Header{Type: wire.Hello}, wire.HelloMsg{Min: 1, Max: 1, Token: []byte(rdmatest.Token)}.Append(nil))
		}},
		{"open name over limit", true, func(c *rawClient) { c.send(wire.Header{Type: wire.Open}, junk[:1000]) }},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			token := ""
			if tc.hello {
				token = rdmatest.Token
			}
			c := dialRaw(t, s.e.Addr(), token)
			tc.send(c)
			// Half-close, so a peer that sent too little is not simply
			// waiting for more until the handshake timeout.
			c.nc.(*net.TCPConn).CloseWrite()
			c.expectClosed()
		})
	}
	// Keep the good transfers going until they have run alongside the
	// bad peers and a few times after.
	for seen := rounds.Load(); rounds.Load() < seen+3; {
		select {
		case err := <-failed:
			cancel()
			wg.Wait()
			t.Fatal(err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	wg.Wait()
	select {
	case err := <-failed:
		t.Fatal(err)
	default:
	}
	if n := s.e.Segments().Len(); n != 1 {
		t.Fatalf("server has %d segments", n)
	}
}

func TestHandshakeRejections(t *testing.T) {
	s := newServed(t)
	for _, tc := range []struct {
		name  string
		hello wire.HelloMsg
		code  wire.Code
	}{
		{"wrong token", wire.HelloMsg{Min: 1, Max: 1, Token: []byte("nope")}, wire.CodeAuth},
		{"empty token", wire.HelloMsg{Min: 1, Max: 1}, wire.CodeAuth},
		{"future versions only", wire.HelloMsg{Min: wire.MaxVersion + 1, Max: 9, Token: []byte(rdmatest.Token)}, wire.CodeVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, s.e.Addr(), "")
			c.send(wire.Header{Version: 1, Type: wire.Hello}, tc.hello.Append(nil))
			c.expect(wire.Error, tc.code)
			c.expectClosed()
		})
	}
}

// rogue is a peer that does the handshake and open correctly and then
// answers data frames however the test says, to check that a lying server
// cannot make the client write outside the range it asked for, panic, or
// hang.
type rogue struct {
	ln     net.Listener
	answer func(w io.Writer, h wire.Header)
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func startRogue(t *testing.T, answer func(w io.Writer, h wire.Header)) *rogue {
	ln, err := net.Listen("tcp", "127.0.0.51:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rogue{ln: ln, answer: answer}
	r.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns = append(r.conns, nc)
			r.mu.Unlock()
			r.wg.Go(func() { r.serve(nc) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		r.mu.Lock()
		for _, nc := range r.conns {
			nc.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

func (r *rogue) serve(nc net.Conn) {
	br := bufio.NewReader(nc)
	c, err := wire.ServerHello(nc, br, []byte(rdmatest.Token), 0)
	if err != nil {
		return
	}
	v := c.Version
	hdr := make([]byte, wire.HeaderSize)
	for {
		h, err := wire.ReadHeader(br, hdr)
		if err != nil {
			return
		}
		switch h.Type {
		case wire.Open:
			name, _ := wire.ReadControl(br, h, 255)
			d := wire.Descriptor{Size: 4 << 20, MaxSlice: 1 << 20, Name: string(name), Location: "cpu:0", Preferred: []string{r.ln.Addr().String()}}
			wire.WriteFrame(nc, wire.Header{Version: v, Type: wire.OpenOK, ID: h.ID, Segment: 9}, d.Append(nil))
		case wire.Write:
			io.CopyN(io.Discard, br, int64(h.Length))
			r.answer(nc, h)
		default:
			r.answer(nc, h)
		}
	}
}

func TestLyingServer(t *testing.T) {
	junk := bytes.Repeat([]byte{0xAB}, 2<<20)
	reply := func(w io.Writer, h wire.Header, typ wire.Type, payload []byte) {
		wire.WriteFrame(w, wire.Header{Version: h.Version, Type: typ, ID: h.ID, Segment: h.Segment, Offset: h.Offset}, payload)
	}
	for _, tc := range []struct {
		name    string
		op      rdma.Op
		answer  func(w io.Writer, h wire.Header)
		timeout time.Duration
		want    error
	}{
		{"longer read-data", rdma.Read, func(w io.Writer, h wire.Header) { reply(w, h, wire.ReadData, junk[:h.Length+100]) }, 0, rdma.ErrNoPath},
		{"shorter read-data", rdma.Read, func(w io.Writer, h wire.Header) { reply(w, h, wire.ReadData, junk[:h.Length-1]) }, 0, rdma.ErrNoPath},
		{"read-data for another offset", rdma.Read, func(w io.Writer, h wire.Header) {
			wire.WriteFrame(w, wire.Header{Version: h.Version, Type: wire.ReadData, ID: h.ID, Segment: h.Segment, Offset: h.Offset + 1}, junk[:h.Length])
		}, 0, rdma.ErrNoPath},
		{"bad crc", rdma.Read, func(w io.Writer, h wire.Header) {
			var b [wire.HeaderSize]byte
			(&wire.Header{Version: h.Version, Type: wire.ReadData, ID: h.ID, Segment: h.Segment, Offset: h.Offset, Length: h.Length}).Put(b[:])
			w.Write(append(append(b[:], junk[:h.Length]...), 1, 2, 3, 4))
		}, 0, rdma.ErrNoPath},
		{"crc in header", rdma.Read, func(w io.Writer, h wire.Header) {
			var b [wire.HeaderSize]byte
			(&wire.Header{Version: h.Version, Type: wire.ReadData, ID: h.ID, Segment: h.Segment, Offset: h.Offset, Length: h.Length, CRC: 1}).Put(b[:])
			w.Write(append(b[:], junk[:h.Length+4]...))
		}, 0, rdma.ErrNoPath},
		{"write-ok for a read", rdma.Read, func(w io.Writer, h wire.Header) { reply(w, h, wire.WriteOK, nil) }, 0, rdma.ErrNoPath},
		{"read-data for a write", rdma.Write, func(w io.Writer, h wire.Header) { reply(w, h, wire.ReadData, junk[:h.Length]) }, 0, rdma.ErrNoPath},
		{"garbage", rdma.Read, func(w io.Writer, h wire.Header) { w.Write(junk[:1000]) }, 0, rdma.ErrNoPath},
		{"unknown request id", rdma.Read, func(w io.Writer, h wire.Header) { h.ID += 1000; reply(w, h, wire.ReadData, junk[:h.Length]) }, 200 * time.Millisecond, rdma.ErrTimeout},
		{"silence", rdma.Write, func(io.Writer, wire.Header) {}, 200 * time.Millisecond, rdma.ErrTimeout},
		{"refusal", rdma.Read, func(w io.Writer, h wire.Header) {
			wire.WriteError(w, h.Version, h.ID, rdma.ErrOutOfRange)
		}, 0, rdma.ErrOutOfRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRogue(t, tc.answer)
			client := newEngine(t, newTransport(t, Options{Topology: loopbackTopology(52, 1), SliceSize: 256 << 10, BackoffMin: time.Minute}))
			// Guard bytes around the window the request may touch.
			mem := bytes.Repeat([]byte{0xEE}, 3<<20)
			seg, err := client.Register("buf", "cpu:0", mem)
			if err != nil {
				t.Fatal(err)
			}
			remote, err := client.OpenSegment(t.Context(), r.ln.Addr().String(), "kv")
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			b, _ := client.AllocateBatch(1)
			start := time.Now()
			if _, err := b.Submit(ctx, rdma.Request{Op: tc.op, Local: seg, LocalOffset: 1 << 20, Remote: remote, Length: 1 << 20}); err != nil {
				t.Fatal(err)
			}
			st, err := b.Wait(t.Context())
			if err != nil || st.State == rdma.Completed || !errors.Is(st.Err, tc.want) {
				t.Fatalf("status %+v (%v), want an error wrapping %v", st, err, tc.want)
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Fatalf("took %v", el)
			}
			for _, guard := range [][]byte{mem[:1<<20], mem[2<<20:]} {
				if !allByte(guard, 0xEE) {
					t.Fatal("bytes outside the requested range changed")
				}
			}
			t.Logf("%v", st.Err)
		})
	}
}

func allByte(b []byte, c byte) bool {
	for _, x := range b {
		if x != c {
			return false
		}
	}
	return true
}

// TestFence: connection A of a session stalls mid-Write; B of the same
// session fences A and writes the same range. A is closed, its partial bytes
// landed before B's, and B's bytes are what memory holds. A fence from
// another session has no effect.
func TestFence(t *testing.T) {
	s := newServed(t)
	id := s.seg.ID()
	a := dialRaw(t, s.e.Addr(), rdmatest.Token)
	var hb [wire.HeaderSize]byte
	(&wire.Header{Version: a.v, Type: wire.Write, ID: 1, Segment: id, Length: 65536}).Put(hb[:])
	a.nc.Write(append(hb[:], bytes.Repeat([]byte{0xAA}, 1000)...)) // and then nothing

	// Another session cannot fence A.
	other := dialRaw(t, s.e.Addr(), "")
	conn, err := wire.ClientHello(other.nc, other.br, []byte(rdmatest.Token), 7)
	if err != nil {
		t.Fatal(err)
	}
	other.v = conn.Version
	(&wire.Header{Version: other.v, Type: wire.Fence, Segment: a.id}).Put(hb[:])
	other.nc.Write(hb[:])
	other.send(wire.Header{Type: wire.Write, ID: 2, Segment: id, Offset: 1 << 20, Length: 4}, []byte("ok!!"))
	other.expect(wire.WriteOK, 0)

	b := dialRaw(t, s.e.Addr(), rdmatest.Token) // session 42, like A
	(&wire.Header{Version: b.v, Type: wire.Fence, Segment: a.id}).Put(hb[:])
	b.nc.Write(hb[:])
	want := bytes.Repeat([]byte{0xBB}, 65536)
	b.send(wire.Header{Type: wire.Write, ID: 3, Segment: id, Length: 65536}, want)
	b.expect(wire.WriteOK, 0)
	a.expectClosed()
	if got := synced(t, s.e, s.seg)[:65536]; !bytes.Equal(got, want) {
		t.Fatalf("memory holds %x..., want B's bytes", got[:8])
	}
}
