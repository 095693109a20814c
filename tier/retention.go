package tier

import (
	"errors"
	"fmt"
	"time"

	"github.com/yuebing/yuebing/block"
)

// Retention is a block's retention class: how hard the tiers try to keep
// it. Eviction takes every evictable Low block before any Normal one,
// every Normal before any High; within a class the tier's eviction policy
// orders the victims. A Pinned block is never evicted, and never demoted
// away, until its class is changed (SetRetention, a Delete) or its
// RetainUntil passes. The zero value is Normal, so callers that know
// nothing of classes keep today's behaviour. docs/retention.md has the
// promises and how they map to Mooncake's and LMCache's.
type Retention uint8

// The retention classes. The numbers are stored (SSD index, transfer
// attributes): never renumber them.
const (
	RetentionNormal Retention = iota
	RetentionLow
	RetentionHigh
	RetentionPinned
	numRetentions
)

// Evictable classes, in the order eviction takes them; a Pinned block is in
// none of them. Policies keep one queue per rank.
const (
	RankLow = iota
	RankNormal
	RankHigh
	NumRanks // Pinned blocks have rank NumRanks: never a victim
)

var retentionNames = [numRetentions]string{"normal", "low", "high", "pinned"}

// String returns the class's name as ParseRetention reads it.
func (r Retention) String() string {
	if r < numRetentions {
		return retentionNames[r]
	}
	return fmt.Sprintf("retention(%d)", uint8(r))
}

// Valid reports whether r is one of the classes.
func (r Retention) Valid() bool { return r < numRetentions }

// Rank orders the class for eviction: blocks of rank 0 go first; a rank of
// NumRanks (Pinned, or an invalid class kept safe) is never evicted.
func (r Retention) Rank() int {
	switch r {
	case RetentionLow:
		return RankLow
	case RetentionNormal:
		return RankNormal
	case RetentionHigh:
		return RankHigh
	}
	return NumRanks
}

// ParseRetention reads a class by name ("pinned", "high", "normal", "low";
// "" is Normal). Anything else is an error wrapping ErrRetention.
func ParseRetention(s string) (Retention, error) {
	if s == "" {
		return RetentionNormal, nil
	}
	for r, name := range retentionNames {
		if s == name {
			return Retention(r), nil
		}
	}
	return 0, fmt.Errorf("%w %q: want pinned, high, normal or low", ErrRetention, s)
}

// Effective returns the class a block recorded with class r until the given
// Unix nanoseconds (0: no end) has at now: Normal once the time has passed.
func Effective(r Retention, until, now int64) Retention {
	if until != 0 && until <= now {
		return RetentionNormal
	}
	return r
}

// Settle returns the class and end (Unix nanoseconds, 0: none) a tier
// records for a block given class r until until at now: Normal with no end
// for an invalid class or one already lapsed.
func Settle(r Retention, until, now int64) (Retention, int64) {
	if !r.Valid() || until != 0 && until <= now {
		return RetentionNormal, 0
	}
	return r, until
}

// Retainer is implemented by tiers that record retention classes (DRAM,
// SSD). A tier without it keeps every block as Normal.
type Retainer interface {
	// SetRetention changes a stored block's class; until is when the class
	// lapses back to Normal (zero: never). It returns ErrNotFound for a
	// block the tier does not hold and ErrRetention for an invalid class.
	SetRetention(key block.Key, r Retention, until time.Time) error
}

// RetentionOf is the class recorded in info at now.
func RetentionOf(info BlockInfo, now time.Time) Retention {
	return Effective(info.Retention, unixNanos(info.RetainUntil), now.UnixNano())
}

// unixNanos is t in Unix nanoseconds, 0 for the zero time.
func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// UnixNanos is t in Unix nanoseconds, 0 for the zero time: how tiers store
// RetainUntil.
func UnixNanos(t time.Time) int64 { return unixNanos(t) }

// FromUnixNanos is the inverse of UnixNanos.
func FromUnixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// setRetention sets the class in t if t records classes.
func setRetention(t Tier, key block.Key, r Retention, until time.Time) error {
	if rt, ok := t.(Retainer); ok {
		return rt.SetRetention(key, r, until)
	}
	return nil
}

// SetRetention changes a stored block's retention class in every tier
// holding it, and in a copy on its way down: Pinned holds it, any other
// class makes it evictable again in that class's turn (a release is
// SetRetention(key, RetentionNormal, time.Time{})). until, when not zero,
// is when the class lapses to Normal. It returns ErrNotFound if no tier
// holds the block.
func (h *Hierarchy) SetRetention(key block.Key, r Retention, until time.Time) error {
	if h.closed.Load() {
		return ErrClosed
	}
	if !r.Valid() {
		return fmt.Errorf("tier: %w: %v", ErrRetention, r)
	}
	mu := h.lock(key)
	mu.Lock()
	defer mu.Unlock()
	e, ok := h.ix.Get(key)
	if !ok || e.Tiers == 0 {
		return ErrNotFound
	}
	// A demotion in flight applies the class to the copy it writes.
	h.inflight.Lock()
	d := h.inflight.m[key]
	if d != nil {
		d.retention, d.retainUntil = r, until
	}
	h.inflight.Unlock()
	found := d != nil
	for level, t := range h.tiers {
		if !e.Tiers.Has(level) {
			continue
		}
		switch err := setRetention(t, key, r, until); {
		case err == nil:
			found = true
		case errors.Is(err, ErrNotFound):
		default:
			return fmt.Errorf("tier: setting %s's retention in %s: %w", key, t.Name(), err)
		}
	}
	if !found {
		return ErrNotFound
	}
	return nil
}
