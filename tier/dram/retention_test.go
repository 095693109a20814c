package dram

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// TestRetentionEvictionOrder: under pressure every low block goes before
// any normal one, every normal before any high one, and pinned blocks stay
// until released or their class lapses.
func TestRetentionEvictionOrder(t *testing.T) {
	const size = 64 << 10
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	d, err := New(Options{Capacity: 16 * size, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	var (
		mu      sync.Mutex
		victims []block.Key
	)
	d.SetEvictHandler(func(_ context.Context, k block.Key, info tier.BlockInfo, h *tier.Handle) {
		mu.Lock()
		victims = append(victims, k)
		mu.Unlock()
		h.Release()
	})
	put := func(i int, r tier.Retention) error {
		k := tiertest.Key(i)
		return d.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{Retention: r})
	}
	classOf := map[block.Key]tier.Retention{}
	// Interleaved, so that recency alone would give a different order.
	order := []tier.Retention{tier.RetentionHigh, tier.RetentionLow, tier.RetentionPinned, tier.RetentionNormal}
	for i := range 16 {
		r := order[i%4]
		if err := put(i, r); err != nil {
			t.Fatal(err)
		}
		classOf[tiertest.Key(i)] = r
	}
	// Touch the low blocks: recency must not save them.
	for i := 1; i < 16; i += 4 {
		h, err := d.Get(t.Context(), tiertest.Key(i))
		if err != nil {
			t.Fatal(err)
		}
		h.Release()
	}
	for i := 100; i < 112; i++ {
		if err := put(i, tier.RetentionPinned); err != nil {
			t.Fatalf("pinned put %d: %v", i, err)
		}
	}
	want := []tier.Retention{tier.RetentionLow, tier.RetentionNormal, tier.RetentionHigh}
	if len(victims) != 12 {
		t.Fatalf("%d victims, want 12", len(victims))
	}
	for i, k := range victims {
		if got := classOf[k]; got != want[i/4] {
			t.Errorf("victim %d is %s, want %s (victims must go in class order)", i, got, want[i/4])
		}
	}
	// Everything left is pinned: a put finds no room.
	if err := put(200, tier.RetentionNormal); !errors.Is(err, tier.ErrNoSpace) {
		t.Fatalf("put into a pinned-full tier: %v, want ErrNoSpace", err)
	}
	for i := 2; i < 16; i += 4 {
		if _, err := d.Stat(tiertest.Key(i)); err != nil {
			t.Errorf("pinned block %d: %v", i, err)
		}
	}
	// Releasing one makes it the victim.
	if err := d.SetRetention(tiertest.Key(2), tier.RetentionNormal, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if info, _ := d.Stat(tiertest.Key(6)); info.Retention != tier.RetentionPinned {
		t.Fatalf("Stat of a pinned block says %s", info.Retention)
	}
	if err := put(201, tier.RetentionPinned); err != nil {
		t.Fatalf("put after a release: %v", err)
	}
	if got := victims[len(victims)-1]; got != tiertest.Key(2) {
		t.Fatalf("victim after the release is %s, want the released block", got)
	}
	// A pin with an end lapses to normal, and then goes.
	if err := d.SetRetention(tiertest.Key(6), tier.RetentionPinned, time.Unix(0, now.Load()).Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := put(202, tier.RetentionPinned); !errors.Is(err, tier.ErrNoSpace) {
		t.Fatalf("put before the pin lapsed: %v, want ErrNoSpace", err)
	}
	now.Add(int64(2 * time.Minute))
	if err := put(203, tier.RetentionPinned); err != nil {
		t.Fatalf("put after the pin lapsed: %v", err)
	}
	if got := victims[len(victims)-1]; got != tiertest.Key(6) {
		t.Fatalf("victim after the lapse is %s, want the lapsed block", got)
	}
	if err := d.SetRetention(tiertest.Key(999), tier.RetentionLow, time.Time{}); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("SetRetention of a missing block: %v", err)
	}
	if err := d.SetRetention(tiertest.Key(10), tier.Retention(42), time.Time{}); !errors.Is(err, tier.ErrRetention) {
		t.Fatalf("SetRetention of a bad class: %v", err)
	}
}
