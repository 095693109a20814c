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

// retainingTier is what the retention tests drive of either layout.
type retainingTier interface {
	tier.Tier
	tier.Retainer
	SetEvictHandler(tier.EvictHandler)
}

// TestRetentionEvictionOrder: both layouts take every low block before
// any normal one and every normal before any high one, never a hard-pinned
// one (the segment layout frees whole segments, carrying the higher
// classes forward), and keep each class and its end across a restart (a
// class changed in place too) until released.
func TestRetentionEvictionOrder(t *testing.T) {
	const size = 64 << 10 // 16 blocks pass the pebble layout's 1 MiB minimum
	for _, layout := range []struct {
		name string
		rec  int64 // bytes a block of size takes
		opts func(dir string, rec int64) Options
		open func(Options) (retainingTier, error)
	}{
		{"segments", recHeaderSize + size,
			func(dir string, rec int64) Options {
				return Options{Dir: dir, Capacity: 16*rec + 1000, SegmentSize: 4 * rec, NoSync: true}
			},
			func(o Options) (retainingTier, error) { return Open(o) }},
		{"pebble-values", block.HeaderSize + 2 + size,
			func(dir string, rec int64) Options { return Options{Dir: dir, Capacity: 16 * rec, NoSync: true} },
			func(o Options) (retainingTier, error) { return OpenPebble(o) }},
	} {
		t.Run(layout.name, func(t *testing.T) {
			opts := layout.opts(t.TempDir(), layout.rec)
			open := func() retainingTier {
				t.Helper()
				s, err := layout.open(opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			testRetentionEvictionOrder(t, open, size)
		})
	}
}

func testRetentionEvictionOrder(t *testing.T, open func() retainingTier, size int) {
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
	lastVictim := func() block.Key {
		mu.Lock()
		defer mu.Unlock()
		return victims[len(victims)-1]
	}
	s := open()
	s.SetEvictHandler(onEvict)
	put := func(s retainingTier, i int, r tier.Retention) error {
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
		t.Fatalf("put into a tier full of hard pins: %v, want ErrNoSpace", err)
	}
	// One pin whose end passes while the tier is closed, one changed in
	// place to high with an end.
	if err := s.SetRetention(tiertest.Key(100), tier.RetentionPinned, time.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	if err := s.SetRetention(tiertest.Key(101), tier.RetentionHigh, until); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRetention(tiertest.Key(999), tier.RetentionHigh, time.Time{}); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("class of a block not stored: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)

	s = open()
	s.SetEvictHandler(onEvict)
	for i := 2; i < 16; i += 4 {
		if info, err := s.Stat(tiertest.Key(i)); err != nil || info.Retention != tier.RetentionPinned {
			t.Errorf("pinned block %d after a restart: %v, %s", i, err, info.Retention)
		}
	}
	if info, err := s.Stat(tiertest.Key(101)); err != nil || info.Retention != tier.RetentionHigh || info.RetainUntil.UnixNano() != until.UnixNano() {
		t.Errorf("block changed to high after a restart: %v, %s until %v; want high until %v", err, info.Retention, info.RetainUntil, until)
	}
	// The pin that lapsed is normal now and goes first, then the high
	// block; then nothing.
	if err := put(s, 201, tier.RetentionPinned); err != nil {
		t.Fatalf("put after the pin lapsed across a restart: %v", err)
	}
	if k := lastVictim(); k != tiertest.Key(100) {
		t.Fatalf("victim is %s, want the block whose pin lapsed", k)
	}
	if err := put(s, 202, tier.RetentionPinned); err != nil {
		t.Fatalf("put after a restart: %v", err)
	}
	if k := lastVictim(); k != tiertest.Key(101) {
		t.Fatalf("victim is %s, want the block changed to high", k)
	}
	if err := put(s, 203, tier.RetentionNormal); !errors.Is(err, tier.ErrNoSpace) {
		t.Fatalf("put into a tier full of hard pins after a restart: %v, want ErrNoSpace", err)
	}
	// Released: evictable.
	if err := s.SetRetention(tiertest.Key(6), tier.RetentionLow, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := put(s, 204, tier.RetentionNormal); err != nil {
		t.Fatalf("put after a release: %v", err)
	}
	if k := lastVictim(); k != tiertest.Key(6) {
		t.Fatalf("victim is %s, want the released block", k)
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
