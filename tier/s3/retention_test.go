package s3_test

import (
	"errors"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/s3"
	"github.com/yuebing/yuebing/tier/s3/s3test"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// TestRetentionEvictionOrder: a full S3 tier evicts every low block before
// any normal one, every normal before any high, and never a hard-pinned
// one, whatever the order they came in.
func TestRetentionEvictionOrder(t *testing.T) {
	srv := s3test.Start(t)
	const size = 10_000
	tr := open(t, opts(srv, 8*size))
	classes := []tier.Retention{
		tier.RetentionHigh, tier.RetentionLow, tier.RetentionPinned, tier.RetentionNormal,
		tier.RetentionLow, tier.RetentionHigh, tier.RetentionNormal, tier.RetentionPinned,
	}
	for i, r := range classes {
		k := tiertest.Key(i)
		if err := tr.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{Retention: r}); err != nil {
			t.Fatalf("put %d (%s): %v", i, r, err)
		}
	}
	held := func() map[tier.Retention]int {
		out := map[tier.Retention]int{}
		for i, r := range classes {
			if _, err := tr.Stat(tiertest.Key(i)); err == nil {
				out[r]++
			}
		}
		return out
	}
	next := 100
	putOne := func() error {
		k := tiertest.Key(next)
		next++
		return tr.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{Retention: tier.RetentionPinned})
	}
	// Each new (pinned) block takes the place of one of the lowest class
	// left.
	for step, want := range []map[tier.Retention]int{
		{tier.RetentionLow: 1, tier.RetentionNormal: 2, tier.RetentionHigh: 2, tier.RetentionPinned: 2},
		{tier.RetentionNormal: 2, tier.RetentionHigh: 2, tier.RetentionPinned: 2},
		{tier.RetentionNormal: 1, tier.RetentionHigh: 2, tier.RetentionPinned: 2},
		{tier.RetentionHigh: 2, tier.RetentionPinned: 2},
		{tier.RetentionHigh: 1, tier.RetentionPinned: 2},
		{tier.RetentionPinned: 2},
	} {
		if err := putOne(); err != nil {
			t.Fatalf("put %d: %v", step, err)
		}
		got := held()
		for _, r := range []tier.Retention{tier.RetentionLow, tier.RetentionNormal, tier.RetentionHigh, tier.RetentionPinned} {
			if got[r] != want[r] {
				t.Fatalf("after %d more puts: held %v, want %v", step+1, got, want)
			}
		}
	}
	// Nothing but hard pins left: the next put finds no room.
	if err := putOne(); !errors.Is(err, tier.ErrNoSpace) {
		t.Fatalf("put into a tier full of hard pins: %v, want ErrNoSpace", err)
	}
	// A released pin is evictable again.
	if err := tr.SetRetention(tiertest.Key(2), tier.RetentionNormal, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := putOne(); err != nil {
		t.Fatalf("put after a release: %v", err)
	}
	if _, err := tr.Stat(tiertest.Key(2)); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("released block kept over a hard pin: %v", err)
	}
}

// TestRetentionSurvivesRestart: classes given at the put and changed after
// the block's segment was uploaded are in the bucket, and a tier opened on
// it returns them from Stat (as a hierarchy's promotion reads them).
func TestRetentionSurvivesRestart(t *testing.T) {
	o := opts(s3test.Start(t), 64<<20)
	until := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	k := func(i int) block.Key { return tiertest.Key(i) }
	beforeRestart(t, o, func(tr *s3.Tier) {
		put := func(i int, r tier.Retention, u time.Time) {
			t.Helper()
			if err := tr.Put(t.Context(), k(i), tiertest.Value(k(i), 5000), tier.PutOptions{Retention: r, RetainUntil: u}); err != nil {
				t.Fatal(err)
			}
		}
		put(0, tier.RetentionPinned, time.Time{})
		put(1, tier.RetentionHigh, until)
		put(2, tier.RetentionLow, time.Time{})
		put(3, tier.RetentionNormal, time.Time{})
		put(4, tier.RetentionPinned, time.Now().Add(-time.Second)) // already lapsed
		if err := tr.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Changed after the upload: class records in the next segment.
		if err := tr.SetRetention(k(3), tier.RetentionPinned, until); err != nil {
			t.Fatal(err)
		}
		if err := tr.SetRetention(k(0), tier.RetentionNormal, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := tr.SetRetention(k(99), tier.RetentionHigh, time.Time{}); !errors.Is(err, tier.ErrNotFound) {
			t.Fatalf("class of a block not stored: %v", err)
		}
	})

	tr := open(t, o)
	checkClass(t, tr, k(0), tier.RetentionNormal, time.Time{})
	checkClass(t, tr, k(1), tier.RetentionHigh, until)
	checkClass(t, tr, k(2), tier.RetentionLow, time.Time{})
	checkClass(t, tr, k(3), tier.RetentionPinned, until)
	checkClass(t, tr, k(4), tier.RetentionNormal, time.Time{})
}

// beforeRestart runs fill on a tier opened on o and closes it, so that a
// tier the test opens next on o knows only what fill left in the bucket.
func beforeRestart(t *testing.T, o s3.Options, fill func(*s3.Tier)) {
	t.Helper()
	tr, err := s3.Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	fill(tr)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkClass fails the test unless tr holds k with class r until until.
func checkClass(t *testing.T, tr tier.Tier, k block.Key, r tier.Retention, until time.Time) {
	t.Helper()
	info, err := tr.Stat(k)
	if err != nil || info.Retention != r || !info.RetainUntil.Equal(until) {
		t.Errorf("block %s in %s: %v, %s until %v; want %s until %v", k, tr.Name(), err, info.Retention, info.RetainUntil, r, until)
	}
}

// TestPromotionKeepsClass: a block read from S3 after a restart is
// promoted into DRAM with the class S3 kept for it, so a hard pin made
// before the restart still holds in the tier the block is read from.
func TestPromotionKeepsClass(t *testing.T) {
	o := opts(s3test.Start(t), 64<<20)
	until := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	k := tiertest.Key(7)
	beforeRestart(t, o, func(tr *s3.Tier) {
		if err := tr.Put(t.Context(), k, tiertest.Value(k, 4000), tier.PutOptions{Retention: tier.RetentionPinned, RetainUntil: until}); err != nil {
			t.Fatal(err)
		}
	})

	h, _ := hierarchy(t, o)
	// The hierarchy promotes a block on its second lower-tier hit.
	checkHGet(t, h, 7, 4000, 1)
	checkHGet(t, h, 7, 4000, 1)
	top := h.Tiers()[0]
	// The promotion's copy lands in the background.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := top.Stat(k); err == nil {
			break
		}
	}
	checkClass(t, top, k, tier.RetentionPinned, until)
}
