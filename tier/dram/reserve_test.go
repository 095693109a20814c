package dram

import (
	"errors"
	"testing"

	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// TestReserveEvictsAndCounts: a reservation takes its space from the
// blocks (evicting the least recently used), counts as used, keeps puts
// out of its space until released, and fails as a put does when the rest
// is pinned.
func TestReserveEvictsAndCounts(t *testing.T) {
	const capacity = 1 << 20
	d, err := New(Options{Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	v := make([]byte, 64<<10)
	for i := range 16 {
		if err := d.Put(t.Context(), tiertest.Key(i), v, tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := d.Reserve(t.Context(), capacity/2)
	if err != nil {
		t.Fatal(err)
	}
	if r.Size() != capacity/2 {
		t.Fatalf("reserved %d bytes, want %d", r.Size(), capacity/2)
	}
	st := d.Stats()
	if st.Used > capacity || st.Blocks > 8 {
		t.Fatalf("after reserving half: %+v, want at most 8 blocks", st)
	}
	if _, err := d.Stat(tiertest.Key(0)); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("the oldest block survived the reservation: %v", err)
	}
	// Puts now share the other half: 16 more leave at most 8 blocks.
	for i := 16; i < 32; i++ {
		if err := d.Put(t.Context(), tiertest.Key(i), v, tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if st := d.Stats(); st.Blocks > 8 || st.Used < capacity/2 {
		t.Fatalf("with half reserved: %+v", st)
	}
	r.Release()
	r.Release() // a second release does nothing
	if st := d.Stats(); st.Used > capacity/2 {
		t.Fatalf("after release: used %d, want at most %d", st.Used, capacity/2)
	}
	if _, err := d.Reserve(t.Context(), 2*capacity); err == nil {
		t.Fatal("a reservation beyond the capacity succeeded")
	}
}

func TestReserveNoSpaceWhenPinned(t *testing.T) {
	d, err := New(Options{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var hs []*tier.Handle
	for i := range 16 {
		if err := d.Put(t.Context(), tiertest.Key(i), make([]byte, 64<<10), tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		h, err := d.Get(t.Context(), tiertest.Key(i))
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	d.opts.MaxWait = 1
	if _, err := d.Reserve(t.Context(), 64<<10); !errors.Is(err, tier.ErrNoSpace) {
		t.Fatalf("reserving with every block read: %v, want ErrNoSpace", err)
	}
	for _, h := range hs {
		h.Release()
	}
}
