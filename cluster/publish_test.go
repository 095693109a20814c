package cluster

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// TestReadYourWrites: a put registered with Publish is read on another node
// at once, with reports too rare to carry it; a delete sent with Deleted
// is served nowhere after it returns, a copy admitted elsewhere included.
func TestReadYourWrites(t *testing.T) {
	c := newTestCluster(t, 3, func(o *Options) {
		o.ReportInterval = time.Hour // only Publish can make the puts visible
		o.Admit = AdmitAlways
	})
	c.waitFormed()
	a, b := c.nodes[0], c.nodes[1]
	n := 200
	if testing.Short() {
		n = 40
	}
	for i := range n {
		k := testKey(1000 + i)
		want := value(i, 1000+i)
		if _, err := a.store.Put(t.Context(), k, want, tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := a.n.Publish(t.Context(), k); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		reader := c.nodes[1+i%2]
		h, o, err := reader.n.ReadRemote(t.Context(), k)
		if err != nil {
			t.Fatalf("put %d on n0, read on %s: %v", i, reader.n.Name(), err)
		}
		if !bytes.Equal(h.Bytes(), want) || o.Source != "n0" {
			t.Fatalf("read %d: %d bytes from %q", i, h.Len(), o.Source)
		}
		h.Release()
	}
	// b admitted a copy of the first key; a delete on a drops both.
	k := testKey(1000)
	if !b.store.Contains(k) {
		t.Fatal("the read on n1 kept no copy with Admit always")
	}
	if err := a.store.Delete(k); err != nil {
		t.Fatal(err)
	}
	dropped, err := a.n.Deleted(t.Context(), k)
	if err != nil || dropped != 1 {
		t.Fatalf("Deleted: %d dropped, %v", dropped, err)
	}
	if b.store.Contains(k) {
		t.Fatal("n1 still holds a deleted block")
	}
	for _, tn := range c.nodes {
		if _, _, err := tn.n.ReadRemote(t.Context(), k); !errors.Is(err, tier.ErrNotFound) {
			t.Fatalf("read of a deleted block on %s: %v", tn.n.Name(), err)
		}
	}
	if got := a.n.Counters().Published; got != int64(n) {
		t.Errorf("published %d, want %d", got, n)
	}
}

// TestReadFailsOver: a holder whose socket accepts but never answers (a
// frozen process) is passed over within PeerTimeout for a live replica;
// a block only it holds is a clean not-found naming it, never its address.
func TestReadFailsOver(t *testing.T) {
	c := newTestCluster(t, 3, func(o *Options) { o.PeerTimeout = 300 * time.Millisecond })
	c.waitFormed()
	a, b, r := c.nodes[0], c.nodes[1], c.nodes[2]
	both, only := testKey(1), testKey(2)
	want := value(1, 5000)
	for _, tn := range []*testNode{a, b} {
		if _, err := tn.store.Put(t.Context(), both, want, tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := tn.n.Publish(t.Context(), both); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.store.Put(t.Context(), only, want, tier.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.n.Publish(t.Context(), only); err != nil {
		t.Fatal(err)
	}
	// a freezes: its HTTP address now accepts connections and says nothing.
	a.srv.Close()
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		t.Skipf("cannot take over %s: %v", a.addr, err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	for range 5 {
		h, o, err := r.n.ReadRemote(t.Context(), both)
		if err != nil {
			t.Fatalf("read with one holder frozen: %v", err)
		}
		if !bytes.Equal(h.Bytes(), want) || o.Source != "n1" {
			t.Fatalf("read %d bytes from %q", h.Len(), o.Source)
		}
		h.Release()
	}
	_, _, err = r.n.ReadRemote(t.Context(), only)
	switch {
	case err == nil:
		t.Fatal("read a block whose only holder is frozen")
	case !errors.Is(err, tier.ErrNotFound) && !errors.Is(err, ErrNoLeader):
		t.Fatalf("only holder frozen: %v, want not found (or no leader)", err)
	case bytes.Contains([]byte(err.Error()), []byte(a.addr)):
		t.Fatalf("the error names the frozen node's address: %v", err)
	}
}

// TestPrefixTwoRoundTrips: a 64-block prefix held on another node is read
// with one call to the leader and one read from the holder; read again,
// with the read alone (the locations are cached).
func TestPrefixTwoRoundTrips(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.waitFormed()
	a, r := c.nodes[0], c.nodes[2]
	keys := make([]block.Key, 64)
	for i := range keys {
		keys[i] = testKey(5000 + i)
		if _, err := a.store.Put(t.Context(), keys[i], value(i, 4096), tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.n.Publish(t.Context(), keys...); err != nil {
		t.Fatal(err)
	}
	for round, want := range []struct{ locates, fetches int64 }{{1, 1}, {0, 1}} {
		before := r.n.Counters()
		got, errs := r.n.ReadMany(t.Context(), keys)
		for i, g := range got {
			if g == nil {
				t.Fatalf("round %d: block %d not read: %v", round, i, errs[i])
			}
			if !bytes.Equal(g.Handle.Bytes(), value(i, 4096)) {
				t.Fatalf("round %d: block %d wrong", round, i)
			}
			g.Handle.Release()
		}
		after := r.n.Counters()
		if l, f := after.Locates-before.Locates, after.Fetches-before.Fetches; l != want.locates || f != want.fetches {
			t.Errorf("round %d: %d calls to the leader and %d reads, want %d and %d", round, l, f, want.locates, want.fetches)
		}
	}
}
