package cluster

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/tier"
)

func TestLookupNameAndReadFrom(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.waitFormed()
	a, b := c.nodes[0], c.nodes[1]
	k := testKey(1)
	want := value(1, 200<<10)
	if _, err := a.store.Put(t.Context(), k, want, tier.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	a.n.SetNameLookup(func(ns, name string) (NameInfo, bool) {
		if ns == "acme/redis" && name == "chunk" {
			return NameInfo{Key: k, Size: int64(len(want)), ExpireAtMs: 42}, true
		}
		return NameInfo{}, false
	})
	info, err := b.n.LookupName(t.Context(), "acme/redis", "chunk")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != k || info.Size != int64(len(want)) || info.ExpireAtMs != 42 || info.Node != a.n.ID() {
		t.Fatalf("lookup: %+v", info)
	}
	// Read straight from the node that answered, without the leader's
	// index and without keeping a copy.
	h, err := b.n.ReadFrom(t.Context(), info.Key, info.Node)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h.Bytes(), want) {
		t.Fatal("ReadFrom returned other bytes")
	}
	h.Release()
	if b.store.Contains(k) {
		t.Error("ReadFrom kept a copy")
	}
	for _, name := range []string{"other", strings.Repeat("x", 100)} {
		if _, err := b.n.LookupName(t.Context(), "acme/redis", name); !errors.Is(err, tier.ErrNotFound) {
			t.Errorf("lookup of %.10q nobody holds: %v", name, err)
		}
	}
	if _, err := b.n.LookupName(t.Context(), "acme/redis", strings.Repeat("x", maxNameLen+1)); !errors.Is(err, ErrBadRequest) {
		t.Errorf("lookup of an over-long name: %v", err)
	}
	if _, err := b.n.ReadFrom(t.Context(), testKey(2), a.n.ID()); !errors.Is(err, tier.ErrNotFound) {
		t.Errorf("ReadFrom of a block the node lacks: %v", err)
	}
	if got := b.n.Counters(); got.NameHits != 1 || got.NameMisses != 2 {
		t.Errorf("counters: %+v", got)
	}
}

// TestSmallBlocksInline: a block of at most inlineMax bytes comes back in
// the expose answer, with no transfer segment, and is still checked; a
// larger one goes through a segment.
func TestSmallBlocksInline(t *testing.T) {
	c := newTestCluster(t, 2, nil)
	c.waitFormed()
	a, b := c.nodes[0], c.nodes[1]
	for i, size := range []int{0, 28, inlineMax, inlineMax + 1} {
		k := testKey(10 + i)
		want := value(i, size)
		if _, err := a.store.Put(t.Context(), k, want, tier.PutOptions{Meta: []byte("m")}); err != nil {
			t.Fatal(err)
		}
		before := a.n.Counters()
		h, o, err := b.n.fetchFrom(t.Context(), k, a.n.ID())
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		if !bytes.Equal(h.Bytes(), want) || string(o.Info.Meta) != "m" {
			t.Fatalf("%d bytes: read %d bytes, meta %q", size, h.Len(), o.Info.Meta)
		}
		h.Release()
		after := a.n.Counters()
		inlined, exposed := after.Inlined-before.Inlined, after.Exposed-before.Exposed
		if size <= inlineMax && (inlined != 1 || exposed != 0) || size > inlineMax && (inlined != 0 || exposed != 1) {
			t.Errorf("%d bytes: inlined %d, exposed %d", size, inlined, exposed)
		}
	}
}
