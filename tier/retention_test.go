package tier_test

import (
	"errors"
	"testing"
	"time"

	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// TestHierarchyRetention: DRAM evicts in class order, demotion keeps a
// block's class in the SSD tier, a hard-pinned block stays in DRAM, Flush
// (what a shutdown does) copies the class down, and SetRetention reaches
// every copy.
func TestHierarchyRetention(t *testing.T) {
	const size = 64 << 10
	h := newHierarchy(t, hcfg{dram: 16 * size, ssd: 8 << 20})
	putR := func(i int, r tier.Retention) {
		t.Helper()
		k := tiertest.Key(i)
		if _, err := h.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{Retention: r}); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	order := []tier.Retention{tier.RetentionHigh, tier.RetentionLow, tier.RetentionPinned, tier.RetentionNormal}
	for i := range 16 {
		putR(i, order[i%4])
	}
	for i := 100; i < 112; i++ {
		putR(i, tier.RetentionNormal)
	}
	ssdTier := h.Tiers()[1]
	eventually(t, "demotions", func() bool {
		for i := 1; i < 16; i += 4 {
			if _, err := ssdTier.Stat(tiertest.Key(i)); err != nil {
				return false
			}
		}
		return true
	})
	// A put evicts until its room is free, and a demoted block's room is
	// freed only once written below, so how many blocks leave DRAM depends
	// on the demotion's pace; the order they leave in does not.
	left := map[tier.Retention]int{}
	for i := range 16 {
		k := tiertest.Key(i)
		e, ok := h.Lookup(k)
		if !ok {
			t.Fatalf("block %d (%s) is gone", i, order[i%4])
		}
		r := order[i%4]
		if e.Tiers.Has(0) {
			continue
		}
		left[r]++
		eventually(t, "demotion", func() bool { _, err := ssdTier.Stat(k); return err == nil })
		if info, err := ssdTier.Stat(k); err != nil || info.Retention != r {
			t.Errorf("%s block %d in SSD: %v, class %s", r, i, err, info.Retention)
		}
	}
	if left[tier.RetentionLow] != 4 || left[tier.RetentionNormal] != 4 {
		t.Errorf("left DRAM: %v; want every low and every normal block gone", left)
	}
	if left[tier.RetentionPinned] != 0 {
		t.Errorf("%d pinned blocks left DRAM", left[tier.RetentionPinned])
	}
	if _, err := h.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if info, err := ssdTier.Stat(tiertest.Key(2)); err != nil || info.Retention != tier.RetentionPinned {
		t.Fatalf("flushed pinned block in SSD: %v, class %s", err, info.Retention)
	}
	if err := h.SetRetention(tiertest.Key(2), tier.RetentionLow, time.Time{}); err != nil {
		t.Fatal(err)
	}
	for level, tr := range h.Tiers() {
		if info, err := tr.Stat(tiertest.Key(2)); err != nil || info.Retention != tier.RetentionLow {
			t.Errorf("released block at level %d: %v, class %s", level, err, info.Retention)
		}
	}
	if err := h.SetRetention(tiertest.Key(9999), tier.RetentionLow, time.Time{}); !errors.Is(err, tier.ErrNotFound) {
		t.Errorf("SetRetention of a missing block: %v", err)
	}
	if err := h.SetRetention(tiertest.Key(2), tier.Retention(9), time.Time{}); !errors.Is(err, tier.ErrRetention) {
		t.Errorf("SetRetention of a bad class: %v", err)
	}
}

func TestParseRetention(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want tier.Retention
		ok   bool
	}{
		{"", tier.RetentionNormal, true},
		{"normal", tier.RetentionNormal, true},
		{"low", tier.RetentionLow, true},
		{"high", tier.RetentionHigh, true},
		{"pinned", tier.RetentionPinned, true},
		{"Pinned", 0, false},
		{"hard", 0, false},
		{" low", 0, false},
	} {
		got, err := tier.ParseRetention(tc.in)
		if tc.ok != (err == nil) || tc.ok && got != tc.want {
			t.Errorf("ParseRetention(%q) = %v, %v", tc.in, got, err)
		}
		if !tc.ok && !errors.Is(err, tier.ErrRetention) {
			t.Errorf("ParseRetention(%q): %v does not wrap ErrRetention", tc.in, err)
		}
		if tc.ok && got.String() != tc.in && tc.in != "" {
			t.Errorf("String of %q is %q", tc.in, got)
		}
	}
	if r := tier.RetentionPinned; r.Rank() != tier.NumRanks {
		t.Errorf("pinned has rank %d, want %d (never a victim)", r.Rank(), tier.NumRanks)
	}
}
