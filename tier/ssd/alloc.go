package ssd

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// reserve finds room for a record of recLen bytes, evicting segments as
// needed, and returns the segment and offset to write it at, with a writer's
// reference on the segment. A prepaid record (a pinned block copied forward)
// is already counted in used: it only needs a place in a segment, and gives
// its bytes back if it cannot get one.
func (s *SSD) reserve(ctx context.Context, recLen int64, prepaid bool) (seg *segment, off int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prepaid {
		defer func() {
			if err != nil {
				s.mu.used -= recLen
				s.signalLocked()
			}
		}()
	}
	for {
		if s.mu.closed {
			return nil, 0, tier.ErrClosed
		}
		if !prepaid && s.mu.used+recLen > s.opts.Capacity {
			if v := s.pickVictimLocked(); v != nil {
				s.evictSegmentLocked(ctx, v)
				continue
			}
			if s.mu.writers == 0 && !s.mu.creating && !s.anyDrainingLocked() {
				return nil, 0, fmt.Errorf("%w: %d bytes wanted, %d of %d used and nothing evictable", tier.ErrNoSpace, recLen, s.mu.used, s.opts.Capacity)
			}
			if err := s.waitLocked(ctx); err != nil {
				return nil, 0, err
			}
			continue
		}
		dedicated := recLen > s.opts.SegmentSize
		seg := s.mu.active
		if dedicated || seg == nil || seg.size+recLen > s.opts.SegmentSize {
			if s.mu.creating {
				if err := s.waitLocked(ctx); err != nil {
					return nil, 0, err
				}
				continue
			}
			seg, err := s.newSegmentLocked()
			if err != nil {
				return nil, 0, err
			}
			if !dedicated {
				if old := s.mu.active; old != nil {
					old.sealed = true
					s.maybeDropLocked(old)
				}
				s.mu.active = seg
				continue
			}
			seg.sealed = true
			if !prepaid && s.mu.used+recLen > s.opts.Capacity {
				s.maybeDropLocked(seg) // room went while the file was created
				continue
			}
			return seg, s.reserveInLocked(seg, recLen, prepaid), nil
		}
		return seg, s.reserveInLocked(seg, recLen, prepaid), nil
	}
}

func (s *SSD) reserveInLocked(seg *segment, recLen int64, prepaid bool) int64 {
	off := seg.size
	seg.size += recLen
	if !prepaid {
		s.mu.used += recLen
	}
	seg.refs++
	seg.writers++
	s.mu.writers++
	seg.access.Store(s.tick.Add(1))
	return off
}

// newSegmentLocked creates a segment file without holding the lock.
func (s *SSD) newSegmentLocked() (*segment, error) {
	s.mu.creating = true
	id := s.mu.nextID
	s.mu.nextID++
	s.mu.Unlock()
	seg, err := createSegment(s.opts.Files, s.segDir, id)
	s.mu.Lock()
	s.mu.creating = false
	s.signalLocked()
	if err != nil {
		return nil, &ioError{op: opCreate, err: err}
	}
	s.adviseRandom(seg.f)
	seg.access.Store(s.tick.Add(1))
	s.mu.segs[id] = seg
	return seg, nil
}

func (s *SSD) waitLocked(ctx context.Context) error {
	ch := s.mu.space
	s.mu.Unlock()
	defer s.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ssd: waiting for space: %w", ctx.Err())
	}
}

func (s *SSD) signalLocked() {
	close(s.mu.space)
	s.mu.space = make(chan struct{})
}

func (s *SSD) anyDrainingLocked() bool {
	for _, seg := range s.mu.segs {
		if seg.draining {
			return true
		}
	}
	return false
}

// pickVictimLocked returns the least recently read segment that can be
// evicted: not being written to, not already draining. Readers do not hold a
// segment back: an unlinked file stays readable through its open descriptor.
//
// Among those it takes the segment whose lowest retention class is lowest,
// so that low blocks go before normal ones and those before high ones. A
// segment of nothing but hard-pinned blocks is passed over unless it has
// dead space to reclaim: evicting it would free nothing.
func (s *SSD) pickVictimLocked() *segment {
	s.expireRetainsLocked()
	var victim *segment
	victimRank := 0
	for _, seg := range s.mu.segs {
		if seg.draining || seg.dropped || seg.writers > 0 {
			continue
		}
		rank := seg.lowestRank()
		if rank == tier.NumRanks && seg.live > 0 && seg.live >= seg.size {
			continue
		}
		if victim == nil || rank < victimRank || rank == victimRank && seg.access.Load() < victim.access.Load() {
			victim, victimRank = seg, rank
		}
	}
	return victim
}

// lowestRank is the lowest retention rank with live bytes in the segment
// (tier.NumRanks when all are hard-pinned, or there are none).
func (seg *segment) lowestRank() int {
	for r, n := range seg.ranks[:tier.NumRanks] {
		if n > 0 {
			return r
		}
	}
	return tier.NumRanks
}

// evictSegmentLocked drops a segment: its unpinned blocks are evicted, its
// pinned ones copied forward. It releases the lock for I/O.
func (s *SSD) evictSegmentLocked(ctx context.Context, v *segment) {
	v.draining = true
	if v == s.mu.active {
		v.sealed = true
		s.mu.active = nil
	}
	s.expirePinsLocked()
	s.expireRetainsLocked()
	// Blocks of a class above the victim's lowest are carried forward
	// with the pinned ones, so that eviction takes classes in order even
	// though it frees whole segments (pickVictimLocked chose the segment
	// holding the lowest class).
	floor := tier.NumRanks
	for _, k := range v.keys {
		if e := s.mu.blocks[k]; e != nil && e.seg == v && e.pinnedUntil == 0 {
			floor = min(floor, e.rank())
		}
	}
	var evicted []block.Key
	type pinnedBlock struct {
		key block.Key
		e   *entry
	}
	var pinned, offered []pinnedBlock
	offer := s.opts.OfferEvicted && s.onEvict.Load() != nil
	for _, k := range v.keys {
		e := s.mu.blocks[k]
		if e == nil || e.seg != v {
			continue
		}
		if e.pinnedUntil != 0 || e.rank() > floor || e.rank() >= tier.NumRanks {
			pinned = append(pinned, pinnedBlock{k, e})
			continue
		}
		delete(s.mu.blocks, k)
		v.live -= e.recLen
		v.ranks[e.rank()] -= e.recLen
		evicted = append(evicted, k)
		if offer {
			offered = append(offered, pinnedBlock{k, e})
		}
	}
	s.evictions.Add(int64(len(evicted)))
	v.refs++ // hold the file open while copying pinned blocks out
	s.mu.Unlock()

	// The evicted blocks' bytes, for a tier below: read while the file is
	// still open. One that fails to read is simply gone.
	handles := make(map[block.Key]*tier.Handle, len(offered))
	for _, p := range offered {
		if _, raw, err := s.readFullRecord(v, p.e, p.key); err == nil {
			handles[p.key] = tier.NewHandle(raw, p.e.hdr.Checksum, nil)
		}
	}

	recs := make([][]byte, len(pinned))
	raws := make([][]byte, len(pinned))
	for i, p := range pinned {
		rec, raw, err := s.readFullRecord(v, p.e, p.key)
		if ioe := (*ioError)(nil); errors.As(err, &ioe) {
			s.fault(ioe)
		} else if err != nil {
			s.opts.Logger.Error("ssd: pinned block unreadable while its segment is evicted; dropping it", "key", p.key, "err", err)
		}
		recs[i], raws[i] = rec, raw
	}

	s.mu.Lock()
	var carry []pinnedBlock
	var carried [][]byte
	for i, p := range pinned {
		if s.mu.blocks[p.key] != p.e {
			continue // deleted meanwhile
		}
		if raws[i] == nil {
			s.dropEntryLocked(p.key, p.e)
			s.corrupt.Add(1)
			continue
		}
		p.e.seg, p.e.mem = nil, raws[i]
		v.live -= p.e.recLen
		v.ranks[p.e.rank()] -= p.e.recLen
		carry = append(carry, p)
		carried = append(carried, recs[i])
	}
	v.keys = nil
	s.mu.trash.keys = append(s.mu.trash.keys, evicted...)
	s.dropSegmentLocked(v)
	// The carried records keep their bytes: they are rewritten as they
	// are, and no put may take their room in between.
	for _, p := range carry {
		s.mu.used += p.e.recLen
	}
	s.releaseSegLocked(v)
	s.mu.Unlock()

	s.emptyTrash()
	if h := s.onEvict.Load(); h != nil {
		metas := make(map[block.Key][]byte, len(offered))
		for _, p := range offered {
			metas[p.key] = p.e.meta
		}
		for _, k := range evicted {
			hd := handles[k]
			info := tier.BlockInfo{}
			if hd != nil {
				info = tier.BlockInfo{Size: int64(hd.Len()), Checksum: hd.Checksum(), HasChecksum: true, Meta: metas[k]}
			}
			(*h)(ctx, k, info, hd)
		}
	}
	// The pinned blocks are others' and their room is paid for: the put
	// whose need for room began this eviction may give up (its caller
	// gone), but their copy must not. Without cancellation the write waits
	// at most for a segment another put is creating.
	keep := context.WithoutCancel(ctx)
	for i, p := range carry {
		stored := carried[i][recHeaderSize : recHeaderSize+int64(p.e.hdr.StoredLen)]
		if err := s.write(keep, p.key, p.e.hdr, stored, p.e.meta, 0, retention{}, p.e); err != nil {
			s.opts.Logger.Warn("ssd: no room to keep a pinned block; dropping it", "key", p.key, "err", err)
			s.mu.Lock()
			if s.mu.blocks[p.key] == p.e {
				s.dropEntryLocked(p.key, p.e)
				s.evictions.Add(1)
			}
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
}

// dropEntryLocked forgets a block (corrupt, or pinned and homeless).
func (s *SSD) dropEntryLocked(k block.Key, e *entry) {
	delete(s.mu.blocks, k)
	if e.pinnedUntil != 0 {
		s.mu.pinned -= int64(e.hdr.RawLen)
	}
	if e.seg != nil {
		e.seg.live -= e.recLen
		e.seg.ranks[e.rank()] -= e.recLen
		s.maybeDropLocked(e.seg)
	}
	s.mu.trash.keys = append(s.mu.trash.keys, k)
}

// maybeDropLocked drops a sealed segment that holds nothing live and has no
// writers.
func (s *SSD) maybeDropLocked(seg *segment) {
	if seg.sealed && seg.live == 0 && seg.writers == 0 && !seg.draining && !seg.dropped && seg != s.mu.active {
		s.dropSegmentLocked(seg)
	}
}

// dropSegmentLocked takes a segment out of the tier; its file is removed by
// emptyTrash and closed when the last reader is done.
func (s *SSD) dropSegmentLocked(seg *segment) {
	seg.dropped = true
	delete(s.mu.segs, seg.id)
	s.mu.used -= seg.size
	seg.refs++ // emptyTrash's, released after the file is removed
	s.mu.trash.segs = append(s.mu.trash.segs, seg)
	s.signalLocked()
}

// emptyTrash removes dropped index entries and segment files. It runs
// without the lock, after the operation that produced them.
func (s *SSD) emptyTrash() {
	s.mu.Lock()
	if s.mu.trash.count++; s.mu.trash.count > 1 {
		// Another goroutine is emptying; it loops until the trash is empty.
		s.mu.Unlock()
		return
	}
	for {
		keys, segs := s.mu.trash.keys, s.mu.trash.segs
		s.mu.trash.keys, s.mu.trash.segs = nil, nil
		s.mu.trash.count = 1
		dbClosed := s.mu.dbClosed
		s.mu.Unlock()
		if len(keys)+len(segs) > 0 && !dbClosed {
			for _, seg := range segs {
				if err := s.opts.Files.Remove(seg.path); err != nil && !os.IsNotExist(err) {
					s.opts.Logger.Warn("ssd: removing segment file", "err", err)
				}
			}
			s.indexWrite(func(b *pebble.Batch) {
				for _, k := range keys {
					b.Delete(blockIndexKey(k), nil)
				}
				for _, seg := range segs {
					b.Delete(markerKey(seg.id), nil)
				}
			})
		}
		s.mu.Lock()
		for _, seg := range segs {
			s.releaseSegLocked(seg)
		}
		if len(s.mu.trash.keys)+len(s.mu.trash.segs) == 0 {
			s.mu.trash.count = 0
			s.signalLocked() // Close waits for the trash to be emptied
			s.mu.Unlock()
			return
		}
	}
}

func (s *SSD) releaseSegLocked(seg *segment) {
	seg.refs--
	if seg.refs == 0 && seg.dropped {
		seg.f.Close()
	}
}
