package ssd

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// TestRetentionEvictionOrder: the SSD tier frees whole segments, yet takes
// every low block before any normal one and every normal before any high
// one (carrying the higher classes forward); hard-pinned blocks stay, also
// across a restart, until released.
func TestRetentionEvictionOrder(t *testing.T) {
	const (
		size = 64 << 10
		rec  = recHeaderSize + size
	)
	dir := t.TempDir()
	opts := Options{Dir: dir, Capacity: 16*rec + 1000, SegmentSize: 4 * rec, NoSync: true}
	s := openTest(t, opts)
	var (
		mu      sync.Mutex
		victims []block.Key
	)
	onEvict := func(_ context.Context, k block.Key, _ tier.BlockInfo, h *tier.Handle) {
		if h != nil {
			h.Release()
		}
		mu.Lock()
		victims = append(victims, k)
		mu.Unlock()
	}
	s.SetEvictHandler(onEvict)
	put := func(s *SSD, i int, r tier.Retention) error {
		k := tiertest.Key(i)
		return s.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{Retention: r})
	}
	classOf := map[block.Key]tier.Retention{}
	order := []tier.Retention{tier.RetentionHigh, tier.RetentionLow, tier.RetentionPinned, tier.RetentionNormal}
	for i := range 16 {
		if err := put(s, i, order[i%4]); err != nil {
			t.Fatal(err)
		}
		classOf[tiertest.Key(i)] = order[i%4]
	}
	for i := 100; i < 112; i++ {
		if err := put(s, i, tier.RetentionPinned); err != nil {
			t.Fatalf("pinned put %d: %v", i, err)
		}
	}
	mu.Lock()
	got := append([]block.Key(nil), victims...)
	mu.Unlock()
	if len(got) != 12 {
		t.Fatalf("%d victims, want 12", len(got))
	}
	want := []tier.Retention{tier.RetentionLow, tier.RetentionNormal, tier.RetentionHigh}
	for i, k := range got {
		if classOf[k] != want[i/4] {
			t.Errorf("victim %d is %s, want %s", i, classOf[k], want[i/4])
		}
	}
	if err := put(s, 200, tier.RetentionNormal); !errors.Is(err, tier.ErrNoSpace) {
		t.Fatalf("put into a pinned-full tier: %v, want ErrNoSpace", err)
	}
	// One pin with an end that passes while the tier is closed.
	if err := s.SetRetention(tiertest.Key(100), tier.RetentionPinned, time.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)

	s = openTest(t, opts)
	s.SetEvictHandler(onEvict)
	for i := 2; i < 16; i += 4 {
		info, err := s.Stat(tiertest.Key(i))
		if err != nil || info.Retention != tier.RetentionPinned {
			t.Errorf("pinned block %d after a restart: %v, %s", i, err, info.Retention)
		}
	}
	// The lapsed pin is the only way in.
	if err := put(s, 201, tier.RetentionPinned); err != nil {
		t.Fatalf("put after the pin lapsed across a restart: %v", err)
	}
	if last := victims[len(victims)-1]; last != tiertest.Key(100) {
		t.Fatalf("victim is %s, want the block whose pin lapsed", last)
	}
	if err := put(s, 202, tier.RetentionNormal); !errors.Is(err, tier.ErrNoSpace) {
		t.Fatalf("put into a pinned-full tier after a restart: %v, want ErrNoSpace", err)
	}
	// Released: evictable.
	if err := s.SetRetention(tiertest.Key(6), tier.RetentionLow, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := put(s, 203, tier.RetentionNormal); err != nil {
		t.Fatalf("put after a release: %v", err)
	}
	if last := victims[len(victims)-1]; last != tiertest.Key(6) {
		t.Fatalf("victim is %s, want the released block", last)
	}
}

func TestLocationRetentionRoundTrip(t *testing.T) {
	f := func(l location) {
		t.Helper()
		got, err := decodeLocation(l.encode())
		if err != nil {
			t.Fatal(err)
		}
		if got.retention != l.retention || got.retainUntil != l.retainUntil || string(got.meta) != string(l.meta) {
			t.Fatalf("round trip of %+v gave %+v", l, got)
		}
	}
	hdr := block.Header{RawLen: 10, StoredLen: 10}
	f(location{recLen: recHeaderSize + 10, hdr: hdr})
	f(location{recLen: recHeaderSize + 13, hdr: hdr, meta: []byte("abc"), retention: tier.RetentionPinned, retainUntil: 12345})
	f(location{recLen: recHeaderSize + 10, hdr: hdr, retention: tier.RetentionLow})
	bad := location{recLen: recHeaderSize + 10, hdr: hdr, retention: tier.RetentionHigh}.encode()
	bad[len(bad)-9] = 77
	if _, err := decodeLocation(bad); err == nil {
		t.Fatal("an unknown class decoded")
	}
}

// TestHardPinnedSegmentCompacts: a segment of nothing but hard-pinned
// blocks with dead space in it may be chosen to reclaim the space; its
// blocks are carried forward, never evicted.
func TestHardPinnedSegmentCompacts(t *testing.T) {
	const (
		size = 64 << 10
		rec  = recHeaderSize + size
	)
	s := openTest(t, Options{Dir: t.TempDir(), Capacity: 16*rec + 1000, SegmentSize: 4 * rec, NoSync: true})
	put := func(i int, r tier.Retention) error {
		k := tiertest.Key(i)
		return s.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{Retention: r})
	}
	// The first segment: three pinned blocks and one deleted, dead space.
	for i := range 4 {
		if err := put(i, tier.RetentionPinned); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(tiertest.Key(3)); err != nil {
		t.Fatal(err)
	}
	// Fill the rest with pinned blocks, then put more: only the dead
	// space can be reclaimed.
	for i := 4; i < 16; i++ {
		if err := put(i, tier.RetentionPinned); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	_ = put(100, tier.RetentionNormal) // may or may not find room; must not cost a pin
	for i := range 16 {
		if i == 3 {
			continue
		}
		if _, err := s.Stat(tiertest.Key(i)); err != nil {
			t.Errorf("hard-pinned block %d: %v", i, err)
		}
	}
}
