package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/yuebing/yuebing/tier"
)

func TestClassAttr(t *testing.T) {
	f := func(pinned int64, r tier.Retention, until int64, meta []byte) {
		t.Helper()
		p, gr, gu, m, err := decodeClassAttr(encodeClassAttr(pinned, r, until, meta))
		if err != nil || p != pinned || gr != r || gu != until || !bytes.Equal(m, meta) {
			t.Fatalf("(%d, %s, %d, %q) reads back as %d %s %d %q %v", pinned, r, until, meta, p, gr, gu, m, err)
		}
	}
	f(0, tier.RetentionNormal, 0, []byte("rec"))
	f(1700000000, tier.RetentionPinned, 0, []byte("rec"))
	f(0, tier.RetentionLow, 1800000000, nil)
	f(5, tier.RetentionHigh, 6, []byte("r"))
	// A normal block keeps the plain form, which every node reads.
	if b := encodeClassAttr(7, tier.RetentionNormal, 0, []byte("x")); !bytes.Equal(b, encodeAttr(7, []byte("x"))) {
		t.Fatalf("a normal block's attribute is %x, not the plain form", b)
	}
	// A node that predates classes refuses a classed block.
	if _, _, err := decodeAttr(encodeClassAttr(0, tier.RetentionPinned, 0, nil)); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("plain decoder on a classed attribute: %v", err)
	}
	bad := encodeClassAttr(0, tier.RetentionPinned, 0, nil)
	bad[attrPinSize] = 9
	for _, b := range [][]byte{bad, bad[:attrPinSize+3]} {
		if _, _, _, _, err := decodeClassAttr(b); !errors.Is(err, ErrBadRequest) {
			t.Errorf("decodeClassAttr(%x) = %v, want ErrBadRequest", b, err)
		}
	}
}

// FuzzDecodeClassAttr: any attribute is read or refused with
// ErrBadRequest; what reads encodes back to itself.
func FuzzDecodeClassAttr(f *testing.F) {
	f.Add(encodeClassAttr(1700000000, tier.RetentionPinned, 3, []byte("rec")))
	f.Add(encodeAttr(1, []byte("r")))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, r, u, m, err := decodeClassAttr(b)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v is not ErrBadRequest", err)
			}
			return
		}
		if p < 0 || u < 0 || !r.Valid() {
			t.Fatalf("%x reads as %d %s %d", b, p, r, u)
		}
		if enc := encodeClassAttr(p, r, u, m); len(b) <= 64 && !bytes.Equal(enc, b) {
			t.Fatalf("%x reads as %d %s %d %q, which encodes to %x", b, p, r, u, m, enc)
		}
	})
}

// TestReplicaKeepsRetention: a replica the leader places on another node
// is stored there with the block's class.
func TestReplicaKeepsRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd and two nodes")
	}
	c := newTestCluster(t, 2, nil)
	c.waitFormed()
	a := c.nodes[0]
	k := testKey(11)
	until := time.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := a.store.Put(t.Context(), k, value(11, 64<<10), tier.PutOptions{Retention: tier.RetentionPinned, RetainUntil: until}); err != nil {
		t.Fatal(err)
	}
	a.n.NoteReplicas(k, 2)
	b := c.nodes[1]
	eventually(t, 15*time.Second, func() error {
		if !b.store.Contains(k) {
			return fmt.Errorf("no replica on %s yet", b.n.Name())
		}
		return nil
	})
	info, _, err := b.store.Stat(k)
	if err != nil || info.Retention != tier.RetentionPinned || !info.RetainUntil.Equal(until) {
		t.Fatalf("replica: %v, class %s until %v; want pinned until %v", err, info.Retention, info.RetainUntil, until)
	}
}
