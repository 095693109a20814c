package tcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/rdmatest"
	"github.com/yuebing/yuebing/rdma/wire"
)

// mapSource serves blocks from a map and counts pins not yet released.
type mapSource struct {
	mu     sync.Mutex
	blocks map[block.Key][]byte
	attr   []byte
	pinned int
}

func (m *mapSource) PinBlock(_ context.Context, k block.Key) (rdma.PinnedBlock, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blocks[k]
	if !ok {
		return rdma.PinnedBlock{}, false
	}
	m.pinned++
	return rdma.PinnedBlock{Data: b, Checksum: block.Checksum(b), Attr: m.attr, Release: func() {
		m.mu.Lock()
		m.pinned--
		m.mu.Unlock()
	}}, true
}

func (m *mapSource) outstanding() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pinned
}

func blockKey(i int) block.Key { return block.OpaqueKey("", []byte{byte(i), byte(i >> 8), 'k'}) }

// blockPair starts a serving and a reading engine; the server holds n
// blocks of size bytes each, block i filled from i.
func blockPair(t *testing.T, n, size int) (srv, cli *rdma.Engine, src *mapSource, cliTr *Transport) {
	t.Helper()
	src = &mapSource{blocks: map[block.Key][]byte{}, attr: []byte("attr")}
	for i := range n {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(i*7 + j)
		}
		src.blocks[blockKey(i)] = b
	}
	srv = newEngine(t, newTransport(t, Options{Topology: loopbackTopology(1, 1)}))
	srv.ServeBlocks(src)
	cliTr = newTransport(t, Options{Topology: loopbackTopology(2, 1)})
	cli = newEngine(t, cliTr)
	return srv, cli, src, cliTr
}

func TestGetBlocks(t *testing.T) {
	const n, size = 600, 3000 // more keys than one Get frame carries
	srv, cli, src, cliTr := blockPair(t, n, size)
	keys := make([]block.Key, 0, n+2)
	for i := range n {
		keys = append(keys, blockKey(i))
		if i == 5 || i == 300 {
			keys = append(keys, blockKey(100000+i)) // not held
		}
	}
	for round := range 3 {
		st, err := cli.GetBlocks(t.Context(), srv.Addr(), keys, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			info, err := st.Next()
			if err != nil {
				t.Fatalf("round %d key %d: %v", round, i, err)
			}
			want, held := src.blocks[k]
			if info.Found != held {
				t.Fatalf("key %d: found %v, held %v", i, info.Found, held)
			}
			if !held {
				continue
			}
			if info.Size != size || info.Checksum != block.Checksum(want) || string(info.Attr) != "attr" {
				t.Fatalf("key %d: info %+v", i, info)
			}
			got := make([]byte, info.Size)
			// Alternate the two ways of taking the bytes, and skip some.
			switch i % 3 {
			case 0:
				err = st.ReadData(got)
			case 1:
				var buf bytes.Buffer
				_, err = st.WriteData(&buf)
				got = buf.Bytes()
			case 2:
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("key %d: wrong bytes", i)
			}
		}
		if _, err := st.Next(); err != io.EOF {
			t.Fatalf("after the last key: %v", err)
		}
		st.Close()
	}
	// One connection served all three rounds.
	if d := cliTr.Stats().Dials; d != 1 {
		t.Errorf("%d dials for three streams", d)
	}
	if p := src.outstanding(); p != 0 {
		t.Errorf("%d blocks still pinned", p)
	}
}

// TestGetBlocksSplice relays a block into a real TCP connection, the way a
// node answers an HTTP GET for a block held elsewhere.
func TestGetBlocksSplice(t *testing.T) {
	const size = 4 << 20
	srv, cli, src, _ := blockPair(t, 1, size)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	out, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	st, err := cli.GetBlocks(t.Context(), srv.Addr(), []block.Key{blockKey(0)}, size)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Next(); err != nil || !info.Found {
		t.Fatalf("next: %+v %v", info, err)
	}
	n, err := st.WriteData(out)
	if err != nil || n != size {
		t.Fatalf("relayed %d bytes: %v", n, err)
	}
	out.Close()
	st.Close()
	if !bytes.Equal(<-got, src.blocks[blockKey(0)]) {
		t.Fatal("relayed bytes differ")
	}
}

func TestGetBlocksLimits(t *testing.T) {
	srv, cli, _, _ := blockPair(t, 1, 5000)
	st, err := cli.GetBlocks(t.Context(), srv.Addr(), []block.Key{blockKey(0)}, 4999)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Next(); !errors.Is(err, rdma.ErrProtocol) {
		t.Fatalf("a block over the size limit: %v, want a protocol error", err)
	}
	st.Close()
	if _, err := cli.GetBlocks(t.Context(), srv.Addr(), nil, 1); !errors.Is(err, rdma.ErrInvalidRequest) {
		t.Fatalf("no keys: %v", err)
	}
	// A wrong token is refused before any key is read.
	other := newEngine(t, newTransport(t, Options{Topology: loopbackTopology(3, 1)}))
	wrong, err := rdma.New(rdma.Options{ClusterToken: "another-token-here", Logger: discardLogger()}, newTransport(t, Options{Topology: loopbackTopology(4, 1)}))
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	if _, err := wrong.GetBlocks(t.Context(), other.Addr(), []block.Key{blockKey(0)}, 1); !errors.Is(err, rdma.ErrAuth) {
		t.Fatalf("wrong token: %v", err)
	}
}

// TestGetBlocksPeerRestart: an idle connection the peer closed is
// replaced on first use, and the read succeeds.
func TestGetBlocksPeerRestart(t *testing.T) {
	src := &mapSource{blocks: map[block.Key][]byte{blockKey(0): []byte("hello")}}
	tr := newTransport(t, Options{Topology: loopbackTopology(1, 1)})
	srv := newEngine(t, tr)
	srv.ServeBlocks(src)
	addr := srv.Addr()
	cli := newEngine(t, newTransport(t, Options{Topology: loopbackTopology(2, 1)}))
	read := func() error {
		st, err := cli.GetBlocks(t.Context(), addr, []block.Key{blockKey(0)}, 100)
		if err != nil {
			return err
		}
		defer st.Close()
		info, err := st.Next()
		if err != nil {
			return err
		}
		b := make([]byte, info.Size)
		if err := st.ReadData(b); err != nil {
			return err
		}
		if string(b) != "hello" {
			return errors.New("wrong bytes")
		}
		return nil
	}
	if err := read(); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	again := newEngine(t, newTransport(t, Options{Topology: rdma.Topology{rdma.AnyLocation: {Preferred: []string{addr}}}}))
	again.ServeBlocks(src)
	if err := read(); err != nil {
		t.Fatalf("after the peer restarted: %v", err)
	}
}

// TestGetBlocksCancel: a stream whose context ends mid-block fails at
// once, and its connection is not reused.
func TestGetBlocksCancel(t *testing.T) {
	srv, cli, src, _ := blockPair(t, 1, 64<<20)
	ctx, cancel := context.WithCancel(t.Context())
	st, err := cli.GetBlocks(ctx, srv.Addr(), []block.Key{blockKey(0)}, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	done := make(chan error, 1)
	go func() { done <- st.ReadData(make([]byte, 64<<20)) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("read after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("read did not end after cancel")
	}
	st.Close()
	// The server lets go of the block once its write fails.
	deadline := time.Now().Add(15 * time.Second)
	for src.outstanding() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if src.outstanding() != 0 {
		t.Fatal("block still pinned after the reader went away")
	}
}

// TestGetOnVersion1 is a peer that negotiated version 1: Get is a protocol
// error there.
func TestGetOnVersion1(t *testing.T) {
	srv, _, _, _ := blockPair(t, 1, 10)
	c := dialRaw(t, srv.Addr(), "")
	hello := wire.HelloMsg{Min: 1, Max: 1, Session: 1, Token: []byte(rdmatest.Token)}
	if err := wire.WriteFrame(c.nc, wire.Header{Version: 1, Type: wire.Hello}, hello.Append(nil)); err != nil {
		t.Fatal(err)
	}
	h, err := wire.ReadHeader(c.br, make([]byte, wire.HeaderSize))
	if err != nil || h.Type != wire.HelloOK || h.Version != 1 {
		t.Fatalf("hello answer %+v %v", h, err)
	}
	c.v = 1
	c.send(wire.Header{Type: wire.Get, ID: 1}, wire.AppendKeys(nil, []block.Key{blockKey(0)}))
	h, err = wire.ReadHeader(c.br, make([]byte, wire.HeaderSize))
	if err != nil || h.Type != wire.Error || h.Code != wire.CodeProtocol {
		t.Fatalf("get on version 1 answered %+v %v, want a protocol error", h, err)
	}
}

// slowWriter takes slowPerMiB per MiB written.
type slowWriter struct{ buf bytes.Buffer }

// The relay's deadline per chunk (1 MiB) and the consumer's pace: a chunk
// takes a tenth of its deadline, leaving the rest to a loaded machine
// (-race, 2 cores shared), while the whole block takes longer than one
// deadline, which is what the test is about.
const (
	slowTimeout = 2 * time.Second
	slowPerMiB  = slowTimeout / 10
	slowSize    = 12 << 20 // 2.4 s at slowPerMiB
)

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(time.Duration(len(p)) * slowPerMiB / (1 << 20))
	return w.buf.Write(p)
}

// TestGetBlocksSlowReader relays a block to a consumer slower than the
// deadlines allow for the whole block: each chunk keeps within them, so
// the block gets through.
func TestGetBlocksSlowReader(t *testing.T) {
	const size = slowSize
	src := &mapSource{blocks: map[block.Key][]byte{}}
	src.blocks[blockKey(0)] = bytes.Repeat([]byte("slow"), size/4)
	opts := func(first int) Options {
		return Options{Topology: loopbackTopology(first, 1), IOTimeout: slowTimeout}
	}
	srv := newEngine(t, newTransport(t, opts(1)))
	srv.ServeBlocks(src)
	cli := newEngine(t, newTransport(t, opts(2)))
	st, err := cli.GetBlocks(t.Context(), srv.Addr(), []block.Key{blockKey(0)}, size)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Next(); err != nil {
		t.Fatal(err)
	}
	var w slowWriter
	w.buf.Grow(size)
	start := time.Now()
	if n, err := st.WriteData(&w); err != nil || n != size {
		t.Fatalf("relayed %d bytes: %v", n, err)
	}
	if !bytes.Equal(w.buf.Bytes(), src.blocks[blockKey(0)]) {
		t.Fatal("relayed bytes differ")
	}
	t.Logf("%d MiB in %v with a %v deadline per chunk", size>>20, time.Since(start).Round(time.Millisecond), slowTimeout)
}
