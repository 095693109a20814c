package s3

import (
	"fmt"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/policy"
)

// Retention classes (docs/retention.md) in the S3 tier: each block's class
// and its end are in its segment's footer (format version 2), a class
// changed after the block's segment was sealed is a class record in the
// open segment's footer, and eviction takes every evictable low block
// before any normal one, normal before high, and never a hard-pinned one,
// as DRAM and the SSD do.

// policyClass is the queue the block waits in: its rank, with a hard pin
// kept in the highest queue and passed over by evictableLocked, so that a
// class change only moves the block between queues.
func (e *entry) policyClass() int { return min(e.retention.Rank(), tier.NumRanks-1) }

// startClassLocked gives a new entry its class: one already lapsed is
// Normal, one with an end is queued to lapse.
func (t *Tier) startClassLocked(key block.Key, e *entry, r tier.Retention, until int64) {
	r, until = tier.Settle(r, until, t.opts.Now().UnixNano())
	e.retention, e.retainUntil = r, until
	if until != 0 {
		t.mu.retains.Push(until, key)
	}
}

// setClassLocked changes a tracked entry's class and moves it to that
// class's queue, at the back: a class change is about the block's future,
// not a hit.
func (t *Tier) setClassLocked(key block.Key, e *entry, r tier.Retention, until int64) {
	t.startClassLocked(key, e, r, until)
	t.mu.pol.Remove(key)
	t.mu.pol.Add(key, policy.Info[block.Key]{Size: max(e.charge(), 1), Class: e.policyClass()})
}

// expireRetainsLocked moves blocks whose class ended to Normal.
func (t *Tier) expireRetainsLocked() {
	t.mu.retains.Expire(t.opts.Now().UnixNano(), func(k block.Key, until int64) {
		if e := t.mu.entries[k]; e != nil && e.retainUntil == until {
			t.setClassLocked(k, e, tier.RetentionNormal, 0)
		}
	})
}

// evictableLocked ends lapsed classes and returns the test eviction asks of
// a victim: not soft-pinned, and not hard-pinned.
func (t *Tier) evictableLocked() func(block.Key) bool {
	t.expireRetainsLocked()
	now := t.opts.Now()
	return func(k block.Key) bool {
		e := t.mu.entries[k]
		return !e.pinnedUntil.After(now) && e.retention != tier.RetentionPinned
	}
}

// SetRetention implements tier.Retainer. A block still in the open segment
// takes the class into its footer entry; one in a sealed segment gets a
// class record in the open segment, so that the class survives a restart
// without the block being rewritten.
func (t *Tier) SetRetention(key block.Key, r tier.Retention, until time.Time) error {
	if !r.Valid() {
		return fmt.Errorf("s3: %w: %v", tier.ErrRetention, r)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return tier.ErrClosed
	}
	e, ok := t.mu.entries[key]
	if !ok {
		return tier.ErrNotFound
	}
	t.setClassLocked(key, e, r, tier.UnixNanos(until))
	if e.seg != t.mu.open {
		o := t.openLocked()
		o.tombs = append(o.tombs, tombstone{Seg: e.seg.name, Key: key, Class: true, Retention: e.retention, RetainUntil: e.retainUntil})
		t.signalLocked()
	}
	return nil
}
