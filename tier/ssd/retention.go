package ssd

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// retention is a block's class as a put gives it.
type retention struct {
	r     tier.Retention
	until int64 // Unix nanoseconds; 0: never lapses
}

// rank is the block's eviction rank as recorded (see segment.ranks); a
// class whose end has passed is moved to Normal by expireRetainsLocked.
func (e *entry) rank() int { return e.retention.Rank() }

// withRetention adds the block's class to what Stat and Range report.
func (e *entry) withRetention(info tier.BlockInfo) tier.BlockInfo {
	info.Retention, info.RetainUntil = e.retention, tier.FromUnixNanos(e.retainUntil)
	return info
}

// startRetentionLocked settles a new entry's class: one already lapsed is
// Normal, one with an end is queued to lapse.
func (s *SSD) startRetentionLocked(key block.Key, e *entry) {
	e.retention, e.retainUntil = tier.Settle(e.retention, e.retainUntil, s.now())
	if e.retainUntil != 0 {
		s.mu.retains.Push(e.retainUntil, key)
	}
}

// setClassLocked changes an entry's class, keeping its segment's counts.
func (s *SSD) setClassLocked(e *entry, r tier.Retention, until int64) {
	if e.seg != nil {
		e.seg.ranks[e.rank()] -= e.recLen
	}
	e.retention, e.retainUntil = r, until
	if e.seg != nil {
		e.seg.ranks[e.rank()] += e.recLen
	}
}

// expireRetainsLocked moves blocks whose class lapsed to Normal. The
// persisted index keeps the old class with its end, which the next open
// reads as lapsed.
func (s *SSD) expireRetainsLocked() {
	s.mu.retains.Expire(s.now(), func(k block.Key, until int64) {
		if e := s.mu.blocks[k]; e != nil && e.retainUntil == until {
			s.setClassLocked(e, tier.RetentionNormal, 0)
		}
	})
}

// SetRetention implements tier.Retainer. The class is persisted with the
// block's location, as soft pins are, so it survives a restart.
func (s *SSD) SetRetention(key block.Key, r tier.Retention, until time.Time) error {
	if !r.Valid() {
		return fmt.Errorf("ssd: %w: %v", tier.ErrRetention, r)
	}
	e, err := s.lockedEntry(key)
	if err != nil {
		return err
	}
	u := tier.UnixNanos(until)
	if u != 0 && u <= s.now() {
		r, u = tier.RetentionNormal, 0
	}
	s.setClassLocked(e, r, u)
	if u != 0 {
		s.mu.retains.Push(u, key)
	}
	loc, inSeg := e.location(), e.seg != nil
	s.mu.Unlock()
	if inSeg {
		s.indexWrite(func(b *pebble.Batch) { b.Set(blockIndexKey(key), loc.encode(), nil) })
	}
	return nil
}
