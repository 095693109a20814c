package ssd

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

func pinNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// lockedEntry takes s.mu and returns key's entry with the lock held; if
// the tier is closed or holds no such block it returns tier.ErrClosed or
// tier.ErrNotFound with the lock released. It is the opening of every
// change to one block (Pin, SetRetention, Delete).
func (s *SSD) lockedEntry(key block.Key) (*entry, error) {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil, tier.ErrClosed
	}
	e, ok := s.mu.blocks[key]
	if !ok {
		s.mu.Unlock()
		return nil, tier.ErrNotFound
	}
	return e, nil
}

// Pin implements tier.Tier. The pin is persisted with the block's location.
func (s *SSD) Pin(key block.Key, until time.Time) error {
	e, err := s.lockedEntry(key)
	if err != nil {
		return err
	}
	s.expirePinsLocked()
	u := pinNanos(until)
	if u <= s.now() {
		if e.pinnedUntil != 0 {
			s.mu.pinned -= int64(e.hdr.RawLen)
		}
		e.pinnedUntil = 0
	} else {
		if e.pinnedUntil == 0 {
			if s.mu.pinned+int64(e.hdr.RawLen) > s.opts.pinLimit() {
				s.mu.Unlock()
				return fmt.Errorf("%w: soft pins would hold %d bytes, over the limit of %d", tier.ErrNoSpace, s.mu.pinned+int64(e.hdr.RawLen), s.opts.pinLimit())
			}
			s.mu.pinned += int64(e.hdr.RawLen)
		}
		e.pinnedUntil = u
		s.mu.pins.Push(u, key)
	}
	loc, inSeg := e.location(), e.seg != nil && !s.mu.closed
	s.mu.Unlock()
	if inSeg {
		s.indexWrite(func(b *pebble.Batch) { b.Set(blockIndexKey(key), loc.encode(), nil) })
	}
	return nil
}

// expirePinsLocked clears soft pins whose time has passed.
func (s *SSD) expirePinsLocked() {
	s.mu.pins.Expire(s.now(), func(k block.Key, until int64) {
		if e := s.mu.blocks[k]; e != nil && e.pinnedUntil == until {
			e.pinnedUntil = 0
			s.mu.pinned -= int64(e.hdr.RawLen)
		}
	})
}
