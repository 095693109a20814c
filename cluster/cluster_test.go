package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
)

// testCluster is an embedded etcd and nodes in this process, each with a
// DRAM store and a real HTTP listener on 127.0.0.1.
type testCluster struct {
	t     testing.TB
	etcd  *Embedded
	nodes []*testNode
	opts  func(*Options)
}

type testNode struct {
	n     *Node
	store *tier.Hierarchy
	srv   *http.Server
	addr  string
}

func startEtcd(t testing.TB) *Embedded {
	t.Helper()
	e, err := StartEmbedded(EmbedOptions{Dir: t.TempDir(), ClientListen: "127.0.0.1:0", PeerListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func newTestCluster(t testing.TB, nodes int, opts func(*Options)) *testCluster {
	c := &testCluster{t: t, etcd: startEtcd(t), opts: opts}
	for i := range nodes {
		c.add(fmt.Sprintf("n%d", i))
	}
	return c
}

func (c *testCluster) add(name string) *testNode {
	t := c.t
	t.Helper()
	d, err := dram.New(dram.Options{Capacity: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	store, err := tier.NewHierarchy([]tier.Tier{d}, tier.HierarchyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Cluster: "test", NodeName: name, Endpoints: []string{c.etcd.Endpoint()},
		Token: "test-cluster-token", TransferListen: "127.0.0.1:0",
		LeaseTTL: 2 * time.Second, ReportInterval: 20 * time.Millisecond,
		ReplicationInterval: 50 * time.Millisecond,
		Logger:              testLogger(),
	}
	if c.opts != nil {
		c.opts(&o)
	}
	n, err := New(o, store)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{n: n, store: store, srv: &http.Server{Handler: n.Handler()}, addr: ln.Addr().String()}
	go tn.srv.Serve(ln)
	if err := n.Start(t.Context(), Addrs{HTTP: tn.addr}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tn.stop)
	c.nodes = append(c.nodes, tn)
	return tn
}

func (tn *testNode) stop() {
	tn.n.Close()
	tn.srv.Close()
	tn.store.Close()
}

// eventually retries f until it returns nil or the deadline passes.
func eventually(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *testCluster) waitFormed() {
	c.t.Helper()
	eventually(c.t, 20*time.Second, func() error {
		for _, tn := range c.nodes {
			if _, ok := tn.n.Leader(); !ok {
				return fmt.Errorf("%s knows no leader", tn.n.Name())
			}
			if m := tn.n.Members(); len(m) != len(c.nodes) {
				return fmt.Errorf("%s sees %d members", tn.n.Name(), len(m))
			}
			if tn.n.rep.syncedTerm.Load() == 0 {
				return fmt.Errorf("%s has not sent its full state", tn.n.Name())
			}
		}
		return nil
	})
}

func value(i, size int) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(i*31 + j*7)
	}
	return b
}

func testKey(i int) block.Key { return block.OpaqueKey("t/m", fmt.Appendf(nil, "k%d", i)) }

func holderNames(t testing.TB, n *Node, k block.Key) []string {
	t.Helper()
	hs, err := n.Holders(t.Context(), []block.Key{k})
	if err != nil {
		return nil
	}
	var out []string
	for _, h := range hs[0] {
		out = append(out, h.Name)
	}
	slices.Sort(out)
	return out
}

// putIndexed stores k on holder and waits until reader finds holder, and
// holder alone, holding it.
func putIndexed(t testing.TB, holder, reader *testNode, k block.Key, data []byte, o tier.PutOptions) {
	t.Helper()
	if _, err := holder.store.Put(t.Context(), k, data, o); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if got := holderNames(t, reader.n, k); !slices.Equal(got, []string{holder.n.Name()}) {
			return fmt.Errorf("holders %v", got)
		}
		return nil
	})
}

func TestReadAcrossNodes(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.waitFormed()
	a, b := c.nodes[0], c.nodes[1]
	k := testKey(1)
	want := value(1, 300<<10)
	putIndexed(t, a, b, k, want, tier.PutOptions{Meta: []byte("meta")})
	h, o, err := b.store.Fetch(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h.Bytes(), want) || o.Source != "n0" || o.Level != tier.RemoteLevel || string(o.Info.Meta) != "meta" {
		t.Fatalf("read %d bytes from %q level %d meta %q", h.Len(), o.Source, o.Level, o.Info.Meta)
	}
	h.Release()
	// A block nobody has is a miss, not an error.
	if _, _, err := b.store.Fetch(t.Context(), testKey(99)); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("missing block: %v", err)
	}
	// Prefix query.
	chain := []block.Key{k, testKey(2)}
	ms, err := c.nodes[2].n.Query(t.Context(), chain)
	if err != nil || len(ms) == 0 || ms[0].Name != "n0" || ms[0].PrefixLen != 1 {
		t.Fatalf("query: %+v, %v", ms, err)
	}
}

func TestReplicasPlacedAndRepaired(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.waitFormed()
	a := c.nodes[0]
	k := testKey(7)
	if _, err := a.store.Put(t.Context(), k, value(7, 64<<10), tier.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	a.n.NoteReplicas(k, 2)
	var holders []string
	eventually(t, 15*time.Second, func() error {
		if holders = holderNames(t, a.n, k); len(holders) != 2 {
			return fmt.Errorf("holders %v", holders)
		}
		return nil
	})
	// Stop a holder other than the leader; the count is repaired.
	li, _ := a.n.Leader()
	var victim *testNode
	for _, tn := range c.nodes {
		if slices.Contains(holders, tn.n.Name()) && tn.n.ID() != li.ID {
			victim = tn
		}
	}
	victim.stop()
	eventually(t, 20*time.Second, func() error {
		hs := holderNames(t, c.nodes[slices.IndexFunc(c.nodes, func(x *testNode) bool { return x != victim })].n, k)
		if len(hs) != 2 || slices.Contains(hs, victim.n.Name()) {
			return fmt.Errorf("holders %v", hs)
		}
		return nil
	})
}

func TestReportRoundTrip(t *testing.T) {
	r := &report{Flags: flagFullBegin, Node: 3, Term: 99, Capacity: 1 << 30, Free: 1 << 20, Load: 0.25,
		Records: []Record{{Key: testKey(1), Tiers: 3, Desired: 2, PinnedUntil: 12345, Size: 4096}, {Key: testKey(2)}},
		Hits:    []Hit{{Key: testKey(3), Count: 7}}}
	b := appendReport(nil, r)
	got, err := decodeReport(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Flags != r.Flags || got.Node != 3 || got.Term != 99 || got.Load != 0.25 || !slices.Equal(got.Records, r.Records) || !slices.Equal(got.Hits, r.Hits) {
		t.Fatalf("got %+v", got)
	}
	b[len(b)/2] ^= 1
	if _, err := decodeReport(b); !errors.Is(err, ErrBadReport) {
		t.Fatalf("corrupt report: %v", err)
	}
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func TestHotBlocksGainReplicas(t *testing.T) {
	c := newTestCluster(t, 3, func(o *Options) {
		o.Admit = AdmitNever
		o.Replication.HotHits = 8
	})
	c.waitFormed()
	a, b := c.nodes[0], c.nodes[1]
	k := testKey(3)
	want := value(3, 32<<10)
	if _, err := a.store.Put(t.Context(), k, want, tier.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if got := holderNames(t, b.n, k); len(got) != 1 {
			return fmt.Errorf("holders %v", got)
		}
		return nil
	})
	// Reads on B (fetched from A each time, not admitted) make the block
	// hot: the leader copies it, to B first (it asked for it).
	eventually(t, 15*time.Second, func() error {
		for range 4 {
			h, _, err := b.store.Fetch(t.Context(), k)
			if err != nil {
				return err
			}
			if !bytes.Equal(h.Bytes(), want) {
				t.Fatal("wrong bytes")
			}
			h.Release()
		}
		if got := holderNames(t, b.n, k); !slices.Contains(got, "n1") {
			return fmt.Errorf("holders %v", got)
		}
		return nil
	})
}

func TestPull(t *testing.T) {
	c := newTestCluster(t, 2, nil)
	c.waitFormed()
	a, b := c.nodes[0], c.nodes[1]
	chain := []block.Key{testKey(10), testKey(11), testKey(12), testKey(13)}
	for i, k := range chain[:3] {
		if _, err := a.store.Put(t.Context(), k, value(i, 100<<10), tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.store.Put(t.Context(), chain[0], value(0, 100<<10), tier.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if got := holderNames(t, b.n, chain[2]); !slices.Equal(got, []string{"n0"}) {
			return fmt.Errorf("holders %v", got)
		}
		return nil
	})
	res, err := b.n.Pull(t.Context(), chain)
	if err != nil {
		t.Fatal(err)
	}
	if res != (PullResult{Present: 1, Pulled: 2, Bytes: 200 << 10, Missing: 1}) {
		t.Fatalf("pull: %+v", res)
	}
	for i, k := range chain[:3] {
		h, _, err := b.store.GetLocal(t.Context(), k)
		if err != nil {
			t.Fatalf("block %d not held after the pull: %v", i, err)
		}
		if !bytes.Equal(h.Bytes(), value(i, 100<<10)) {
			t.Fatalf("block %d pulled wrong", i)
		}
		h.Release()
	}
	// The copies reach the index: the pulled node now holds the prefix.
	eventually(t, 10*time.Second, func() error {
		if got := holderNames(t, a.n, chain[2]); !slices.Equal(got, []string{"n0", "n1"}) {
			return fmt.Errorf("holders %v", got)
		}
		return nil
	})
}
