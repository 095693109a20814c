package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/rdmatest"
)

// network wraps the real dialer so a test can cut paths: a cut closes the
// real socket after a number of bytes have crossed it, and a NIC marked
// unplugged refuses new connections, the way a pulled cable would.
type network struct {
	mu        sync.Mutex
	cutAfter  map[string]int64 // remote address -> bytes before the close
	unplugged map[string]bool
	dialed    map[rdma.Path]int
	conns     map[string][]net.Conn
}

func newNetwork() *network {
	return &network{cutAfter: map[string]int64{}, unplugged: map[string]bool{}, dialed: map[rdma.Path]int{}, conns: map[string][]net.Conn{}}
}

func (n *network) dial(ctx context.Context, local, remote string) (net.Conn, error) {
	n.mu.Lock()
	unplugged := n.unplugged[remote]
	limit, cut := n.cutAfter[remote]
	if cut {
		// One cut per arming; after it the NIC stays unplugged.
		delete(n.cutAfter, remote)
	}
	n.dialed[rdma.Path{Local: local, Remote: remote}]++
	n.mu.Unlock()
	if unplugged {
		return nil, fmt.Errorf("network: %s is unplugged", remote)
	}
	c, err := dial(ctx, local, remote)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.conns[remote] = append(n.conns[remote], c)
	n.mu.Unlock()
	if !cut {
		return c, nil
	}
	return &cutConn{Conn: c, left: limit, onCut: func() { n.unplug(remote) }}, nil
}

// cutNow unplugs remote and closes every connection to it.
func (n *network) cutNow(remote string) {
	n.mu.Lock()
	n.unplugged[remote] = true
	conns := n.conns[remote]
	n.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (n *network) arm(remote string, after int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cutAfter[remote] = after
}

func (n *network) unplug(remote string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.unplugged[remote] = true
}

func (n *network) dials(p rdma.Path) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dialed[p]
}

// cutConn closes its socket once left bytes have been read or written. A
// read or write that would cross the limit is cut short at it, so the cut
// lands inside a frame rather than neatly between two.
type cutConn struct {
	net.Conn
	mu    sync.Mutex
	left  int64
	onCut func()
}

// budget returns how much of n bytes may still pass.
func (c *cutConn) budget(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(min(int64(n), max(c.left, 0)))
}

func (c *cutConn) count(n int) {
	c.mu.Lock()
	c.left -= int64(n)
	cut := c.left <= 0 && c.onCut != nil
	if cut {
		c.onCut()
		c.onCut = nil
	}
	c.mu.Unlock()
	if cut {
		c.Conn.Close()
	}
}

func (c *cutConn) Read(p []byte) (int, error) {
	if b := c.budget(len(p)); b < len(p) {
		p = p[:max(b, 1)] // a zero-length read would return at once; let the closed socket fail it
	}
	n, err := c.Conn.Read(p)
	c.count(n)
	return n, err
}

func (c *cutConn) Write(p []byte) (int, error) {
	b := c.budget(len(p))
	n, err := c.Conn.Write(p[:b])
	c.count(n)
	if err == nil && n < len(p) {
		err = net.ErrClosed
	}
	return n, err
}

type cluster struct {
	server, client *rdma.Engine
	serverTr       *Transport
	clientTr       *Transport
	serverMem      []byte
	localMem       []byte
	local          *rdma.Segment
	remote         *rdma.RemoteSegment
	net            *network
}

const clusterSeg = 16 << 20

// newCluster starts a server with server NICs and a client with client NICs
// whose connections go through a cuttable network.
func newCluster(t *testing.T, server, client rdma.Topology, copts Options) *cluster {
	t.Helper()
	c := &cluster{net: newNetwork()}
	// The server's timers are the client's: a test that gives the client
	// long ones so that only its cuts break paths needs the server not to
	// close connections on a timer of its own either.
	c.serverTr = newTransport(t, Options{Topology: server, DialTimeout: copts.DialTimeout, IOTimeout: copts.IOTimeout})
	c.server = newEngine(t, c.serverTr)
	c.serverMem = make([]byte, clusterSeg)
	fill(rand.New(rand.NewPCG(1, 2)), c.serverMem)
	if _, err := c.server.Register("kv", "cpu:0", c.serverMem); err != nil {
		t.Fatal(err)
	}
	copts.Topology = client
	copts.Dial = c.net.dial
	c.clientTr = newTransport(t, copts)
	c.client = newEngine(t, c.clientTr)
	c.localMem = make([]byte, clusterSeg)
	var err error
	if c.local, err = c.client.Register("buf", "cpu:0", c.localMem); err != nil {
		t.Fatal(err)
	}
	if c.remote, err = c.client.OpenSegment(t.Context(), c.server.Addr(), "kv"); err != nil {
		t.Fatal(err)
	}
	return c
}

func newEngine(t testing.TB, tr rdma.Transport) *rdma.Engine {
	t.Helper()
	e, err := rdma.New(rdma.Options{ClusterToken: rdmatest.Token}, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func fill(rng *rand.Rand, b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
}

// whole moves the whole segment in 4 requests.
func (c *cluster) whole(t *testing.T, ctx context.Context, op rdma.Op) rdma.Status {
	t.Helper()
	b, err := c.client.AllocateBatch(4)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	const part = clusterSeg / 4
	for i := range 4 {
		off := uint64(i * part)
		if _, err := b.Submit(ctx, rdma.Request{Op: op, Local: c.local, LocalOffset: off, Remote: c.remote, RemoteOffset: off, Length: part}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := b.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestFailoverOnePathCut(t *testing.T) {
	for _, op := range []rdma.Op{rdma.Read, rdma.Write} {
		t.Run(op.String(), func(t *testing.T) {
			opts := noTimers
			opts.SliceSize, opts.BackoffMin = 256<<10, time.Minute
			c := newCluster(t, loopbackTopology(11, 4), loopbackTopology(21, 4), opts)
			if op == rdma.Write {
				copy(c.localMem, c.serverMem)
				for i := range c.localMem {
					c.localMem[i] ^= 0x5a
				}
				clear(c.serverMem)
			}
			// Each of the 4 paths carries about 4 MiB; cut one after 1.
			// The cut lands inside a frame, so a slice is caught mid-way.
			victim := c.serverTr.Addrs()[1]
			c.net.arm(victim, 1<<20+12345)
			st := c.whole(t, t.Context(), op)
			if st.State != rdma.Completed || st.Transferred != clusterSeg {
				t.Fatalf("batch %+v", st)
			}
			if !bytes.Equal(c.localMem, c.serverMem) {
				t.Fatalf("bytes differ at %d", firstDiff(c.localMem, c.serverMem))
			}
			s := c.clientTr.Stats()
			if s.Retries == 0 || s.PathsDown == 0 {
				t.Fatalf("no failover happened: %+v", s)
			}
			t.Logf("stats %+v", s)
		})
	}
}

func TestFailoverAllPathsCut(t *testing.T) {
	// Without timers the batch can only fail by the cuts: had it waited
	// for a timeout, ctx would end it first, with another error.
	opts := noTimers
	opts.SliceSize, opts.BackoffMin = 256<<10, time.Minute
	c := newCluster(t, loopbackTopology(11, 2), loopbackTopology(21, 2), opts)
	for _, a := range c.serverTr.Addrs() {
		c.net.arm(a, 1<<20)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	st := c.whole(t, ctx, rdma.Read)
	if st.State != rdma.Failed || !errors.Is(st.Err, rdma.ErrNoPath) {
		t.Fatalf("batch %+v, want failed with ErrNoPath", st)
	}
	t.Logf("failed after %v: %v", time.Since(start), st.Err)
}

// noTimers are timeouts no transfer here comes near: with them only a
// test's cuts break a path. With the defaults (5 s to dial, 10 s without an
// answer) a machine loaded enough to stall the test's goroutines for that
// long fails a path over by timer, which the transport rightly does, and a
// test asserting which paths carried the bytes then fails.
var noTimers = Options{DialTimeout: time.Minute, IOTimeout: time.Minute}

// TestSecondaryPathsOnFailure: the secondary paths carry nothing while the
// preferred one is up, and the transfer once it is cut.
func TestSecondaryPathsOnFailure(t *testing.T) {
	server := rdma.Topology{rdma.AnyLocation: {Preferred: []string{"127.0.0.11:0"}, Secondary: []string{"127.0.0.12:0"}}}
	client := rdma.Topology{rdma.AnyLocation: {Preferred: []string{"127.0.0.21:0"}, Secondary: []string{"127.0.0.22:0"}}}
	opts := noTimers
	opts.SliceSize, opts.BackoffMin = 256<<10, time.Minute
	c := newCluster(t, server, client, opts)
	pref, sec := c.serverTr.Addrs()[0], c.serverTr.Addrs()[1]
	if st := c.whole(t, t.Context(), rdma.Read); st.State != rdma.Completed {
		t.Fatalf("batch %+v", st)
	}
	if n := c.net.dials(rdma.Path{Local: "127.0.0.21:0", Remote: sec}); n != 0 {
		t.Fatalf("secondary path used %d times while the preferred one was up", n)
	}
	clear(c.localMem)
	c.net.cutNow(pref)
	if st := c.whole(t, t.Context(), rdma.Read); st.State != rdma.Completed {
		t.Fatalf("batch after cut %+v", st)
	}
	if !bytes.Equal(c.localMem, c.serverMem) {
		t.Fatal("bytes differ")
	}
	if n := c.net.dials(rdma.Path{Local: "127.0.0.21:0", Remote: sec}); n == 0 {
		t.Fatal("secondary path never used after the preferred one broke")
	}
}

func TestPoolEviction(t *testing.T) {
	c := newCluster(t, loopbackTopology(11, 4), loopbackTopology(21, 4), Options{SliceSize: 128 << 10, MaxEndpoints: 2})
	for range 3 {
		clear(c.localMem)
		if st := c.whole(t, t.Context(), rdma.Read); st.State != rdma.Completed {
			t.Fatalf("batch %+v", st)
		}
		if !bytes.Equal(c.localMem, c.serverMem) {
			t.Fatal("bytes differ")
		}
	}
	if s := c.clientTr.Stats(); s.Evictions == 0 {
		t.Fatalf("4 paths through a pool of 2 evicted nothing: %+v", s)
	}
}

func TestBackoffDoublesAndRecovers(t *testing.T) {
	tr := newTransport(t, Options{BackoffMin: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond})
	tr.env = rdma.Env{Logger: discardLogger()}
	p := rdma.Path{Local: "a", Remote: "b"}
	now := time.Now()
	if !tr.health.up(p, now) {
		t.Fatal("fresh path is down")
	}
	want := []time.Duration{10, 20, 40, 40}
	for i, w := range want {
		// Bracketed by clock readings, not measured against a margin: a
		// loaded machine may take any time between the two.
		before := time.Now()
		tr.markDown(p, errors.New("x"))
		after := time.Now()
		tr.health.mu.Lock()
		until := tr.health.paths[p].downUntil
		tr.health.mu.Unlock()
		if d := w * time.Millisecond; until.Before(before.Add(d)) || until.After(after.Add(d)) {
			t.Fatalf("failure %d: down until %v after the failure began, %v after it ended; want %v", i+1, until.Sub(before), until.Sub(after), d)
		}
		if tr.health.up(p, until.Add(-time.Nanosecond)) {
			t.Fatalf("failure %d: path up while backing off", i+1)
		}
		if !tr.health.up(p, until) {
			t.Fatalf("failure %d: path still down when its backoff ran out", i+1)
		}
	}
	tr.health.ok(p)
	if !tr.health.up(p, time.Now()) {
		t.Fatal("path down after a success")
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
