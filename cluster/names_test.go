package cluster

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/block"
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

// TestReadOneRoundTrip: blocks of any size, and several at once, come
// back in one read request, with their metadata, checked; a key the holder
// lacks is a nil entry, not an error.
func TestReadOneRoundTrip(t *testing.T) {
	c := newTestCluster(t, 2, nil)
	c.waitFormed()
	a, b := c.nodes[0], c.nodes[1]
	var keys []block.Key
	var want [][]byte
	for i, size := range []int{0, 28, 64 << 10, 1 << 20} {
		k := testKey(10 + i)
		v := value(i, size)
		if _, err := a.store.Put(t.Context(), k, v, tier.PutOptions{Meta: []byte("m")}); err != nil {
			t.Fatal(err)
		}
		keys, want = append(keys, k), append(want, v)
	}
	missing := testKey(99)
	keys, want = append(keys, missing), append(want, nil)
	before := a.n.Counters().Served
	got, err := b.n.readFrom(t.Context(), a.n.ID(), keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		switch {
		case want[i] == nil && g != nil:
			t.Errorf("key %d: read a block the holder lacks", i)
		case want[i] != nil && g == nil:
			t.Errorf("key %d (%d bytes): not read", i, len(want[i]))
		case g != nil && (!bytes.Equal(g.Handle.Bytes(), want[i]) || string(g.Origin.Info.Meta) != "m" || g.Origin.Source != "n0"):
			t.Errorf("key %d: %d bytes, meta %q, from %q", i, g.Handle.Len(), g.Origin.Info.Meta, g.Origin.Source)
		}
		if g != nil {
			g.Handle.Release()
		}
	}
	if served := a.n.Counters().Served - before; served != 4 {
		t.Errorf("served %d blocks, want 4", served)
	}
}
