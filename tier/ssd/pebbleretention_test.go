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

// TestPebbleValuesRetention: the pebble-values layout takes every low
// block before any normal one and every normal before any high one, never
// a hard-pinned one, and keeps each class and its end across a restart
// (a class changed in place too), as the segment layout does.
func TestPebbleValuesRetention(t *testing.T) {
	const (
		size = 64 << 10 // 16 blocks pass the tier's 1 MiB minimum
		rec  = block.HeaderSize + 2 + size
	)
	dir := t.TempDir()
	opts := Options{Dir: dir, Capacity: 16 * rec, NoSync: true}
	open := func() *PebbleStore {
		t.Helper()
		p, err := OpenPebble(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	var (
		mu      sync.Mutex
		victims []block.Key
	)
	onEvict := func(_ context.Context, k block.Key, _ tier.BlockInfo, _ *tier.Handle) {
		mu.Lock()
		victims = append(victims, k)
		mu.Unlock()
	}
	lastVictim := func() block.Key {
		mu.Lock()
		defer mu.Unlock()
		return victims[len(victims)-1]
	}
	p := open()
	p.SetEvictHandler(onEvict)
	put := func(p *PebbleStore, i int, r tier.Retention) error {
		k := tiertest.Key(i)
		return p.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{Retention: r})
	}
	classOf := map[block.Key]tier.Retention{}
	order := []tier.Retention{tier.RetentionHigh, tier.RetentionLow, tier.RetentionPinned, tier.RetentionNormal}
	for i := range 16 {
		if err := put(p, i, order[i%4]); err != nil {
			t.Fatal(err)
		}
		classOf[tiertest.Key(i)] = order[i%4]
	}
	for i := 100; i < 112; i++ {
		if err := put(p, i, tier.RetentionPinned); err != nil {
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
	if err := put(p, 200, tier.RetentionNormal); !errors.Is(err, tier.ErrNoSpace) {
		t.Fatalf("put into a tier full of hard pins: %v, want ErrNoSpace", err)
	}
	// One pin whose end passes while the tier is closed, one changed in
	// place to high with an end.
	if err := p.SetRetention(tiertest.Key(100), tier.RetentionPinned, time.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	if err := p.SetRetention(tiertest.Key(101), tier.RetentionHigh, until); err != nil {
		t.Fatal(err)
	}
	if err := p.SetRetention(tiertest.Key(999), tier.RetentionHigh, time.Time{}); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("class of a block not stored: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)

	p = open()
	p.SetEvictHandler(onEvict)
	for i := 2; i < 16; i += 4 {
		if info, err := p.Stat(tiertest.Key(i)); err != nil || info.Retention != tier.RetentionPinned {
			t.Errorf("pinned block %d after a restart: %v, %s", i, err, info.Retention)
		}
	}
	if info, err := p.Stat(tiertest.Key(101)); err != nil || info.Retention != tier.RetentionHigh || info.RetainUntil.UnixNano() != until.UnixNano() {
		t.Errorf("block changed to high after a restart: %v, %s until %v; want high until %v", err, info.Retention, info.RetainUntil, until)
	}
	// The pin that lapsed is normal now and goes first, then the high
	// block; then nothing.
	if err := put(p, 201, tier.RetentionPinned); err != nil {
		t.Fatalf("put after the pin lapsed across a restart: %v", err)
	}
	if k := lastVictim(); k != tiertest.Key(100) {
		t.Fatalf("victim is %s, want the block whose pin lapsed", k)
	}
	if err := put(p, 202, tier.RetentionPinned); err != nil {
		t.Fatalf("put after a restart: %v", err)
	}
	if k := lastVictim(); k != tiertest.Key(101) {
		t.Fatalf("victim is %s, want the block changed to high", k)
	}
	if err := put(p, 203, tier.RetentionNormal); !errors.Is(err, tier.ErrNoSpace) {
		t.Fatalf("put into a tier full of hard pins after a restart: %v, want ErrNoSpace", err)
	}
	// Released: evictable.
	if err := p.SetRetention(tiertest.Key(6), tier.RetentionLow, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := put(p, 204, tier.RetentionNormal); err != nil {
		t.Fatalf("put after a release: %v", err)
	}
	if k := lastVictim(); k != tiertest.Key(6) {
		t.Fatalf("victim is %s, want the released block", k)
	}
}
