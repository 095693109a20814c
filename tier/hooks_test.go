package tier_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// changeLog records OnChange events as "key-index level +/-".
type changeLog struct {
	mu   sync.Mutex
	keys map[block.Key]int
	evs  []string
}

func (l *changeLog) fn(k block.Key, level int, added bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sign := "-"
	if added {
		sign = "+"
	}
	l.evs = append(l.evs, fmt.Sprintf("k%d %d%s", l.keys[k], level, sign))
}

func (l *changeLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.evs
	l.evs = nil
	return out
}

func TestOnChange(t *testing.T) {
	h := newHierarchy(t, hcfg{dram: 1 << 20, ssd: 8 << 20})
	log := &changeLog{keys: map[block.Key]int{}}
	h.OnChange(log.fn)
	k := func(i int) block.Key {
		key := block.OpaqueKey("t/m", fmt.Appendf(nil, "%d", i))
		log.keys[key] = i
		return key
	}
	f := func(step string, want ...string) {
		t.Helper()
		got := log.take()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: events %v, want %v", step, got, want)
		}
	}
	put(t, h, k(1), make([]byte, 600<<10))
	f("put", "k1 0+")
	put(t, h, k(1), make([]byte, 600<<10))
	f("duplicate put")
	// A second block evicts the first to SSD.
	put(t, h, k(2), make([]byte, 600<<10))
	// The tier's counters move before the hooks run, so wait for the
	// events themselves. The demotion and the put's commit race; each
	// key's own events are in order.
	var got []string
	eventually(t, "the demotion's events", func() bool {
		got = append(got, log.take()...)
		return len(got) >= 3
	})
	var k1, k2 []string
	for _, e := range got {
		if e[:2] == "k1" {
			k1 = append(k1, e)
		} else {
			k2 = append(k2, e)
		}
	}
	if !slices.Equal(k1, []string{"k1 0-", "k1 1+"}) || !slices.Equal(k2, []string{"k2 0+"}) {
		t.Fatalf("demotion: events %v", got)
	}
	if err := h.Pin(k(1), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	f("pin", "k1 1+")
	if err := h.Delete(k(1)); err != nil {
		t.Fatal(err)
	}
	f("delete", "k1 1-")
}

// remote is a fake RemoteReader holding blocks in a map.
type remote struct {
	blocks map[block.Key][]byte
	calls  int
}

func (r *remote) ReadRemote(_ context.Context, k block.Key) (*tier.Handle, tier.Origin, error) {
	r.calls++
	v, ok := r.blocks[k]
	if !ok {
		return nil, tier.Origin{}, tier.ErrNotFound
	}
	return tier.NewHandle(v, block.Checksum(v), nil), tier.Origin{Source: "elsewhere", Info: tier.BlockInfo{Meta: []byte("m")}}, nil
}

func TestRemoteAndAccess(t *testing.T) {
	h := newHierarchy(t, hcfg{dram: 1 << 20, ssd: 8 << 20})
	var accessed []block.Key
	h.OnAccess(func(k block.Key, _ int) { accessed = append(accessed, k) })
	local, far, none := block.OpaqueKey("t/m", []byte("l")), block.OpaqueKey("t/m", []byte("f")), block.OpaqueKey("t/m", []byte("n"))
	put(t, h, local, []byte("local"))
	r := &remote{blocks: map[block.Key][]byte{far: []byte("far")}}

	if _, _, err := h.Get(t.Context(), far); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("without a remote: %v", err)
	}
	h.SetRemote(r)
	hd, o, err := h.Fetch(t.Context(), far)
	if err != nil || !bytes.Equal(hd.Bytes(), []byte("far")) || o.Level != tier.RemoteLevel || o.Source != "elsewhere" {
		t.Fatalf("remote fetch: %v %+v", err, o)
	}
	hd.Release()
	hd, level, err := h.Get(t.Context(), local)
	if err != nil || level != 0 || r.calls != 1 {
		t.Fatalf("local get: level %d, %v, remote calls %d", level, err, r.calls)
	}
	hd.Release()
	if _, _, err := h.GetLocal(t.Context(), far); !errors.Is(err, tier.ErrNotFound) || r.calls != 1 {
		t.Fatalf("GetLocal consulted the remote: %v, calls %d", err, r.calls)
	}
	if _, _, err := h.Get(t.Context(), none); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("missing everywhere: %v", err)
	}
	if !slices.Equal(accessed, []block.Key{far, local}) {
		t.Fatalf("accesses %v", accessed)
	}
	h.SetRemote(nil)
	if _, _, err := h.Get(t.Context(), far); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("remote turned off: %v", err)
	}
}
