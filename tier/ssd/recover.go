package ssd

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/yuebing/yuebing/block"
)

// recover rebuilds the in-memory state from the segment files and the
// persisted index: entries whose segment is gone are dropped, and every
// segment is rescanned past its marker for records whose index write was
// lost, up to the first record that does not verify, where the file is cut.
func (s *SSD) recover() error {
	// Nothing else can reach the tier yet; the lock is held for the
	// methods' contracts, not for exclusion.
	s.mu.Lock()
	defer s.emptyTrash()
	defer s.mu.Unlock()
	fs := s.opts.Files
	dirents, err := fs.ReadDir(s.segDir)
	if err != nil {
		return fmt.Errorf("ssd: listing segments: %w", err)
	}
	for _, de := range dirents {
		id, ok := parseSegmentName(de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		path := filepath.Join(s.segDir, de.Name())
		f, err := fs.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("ssd: opening segment: %w", err)
		}
		size, err := f.Size()
		if err != nil {
			f.Close()
			return fmt.Errorf("ssd: %w", err)
		}
		seg := &segment{id: id, path: path, f: f, size: size, sealed: true}
		seg.access.Store(int64(id)) // older segments count as less recently used
		s.mu.segs[id] = seg
		s.mu.nextID = max(s.mu.nextID, id+1)
	}
	s.tick.Store(int64(s.mu.nextID))

	// Committed (and closed) by commitBatch below; on an earlier error it
	// is left to the garbage collector, as pebble allows.
	batch := s.idx.db.NewBatch()
	dropped := 0
	err = s.scanIndex(prefixBlock, func(k, v []byte) {
		var key block.Key
		copy(key[:], k[1:])
		l, err := decodeLocation(v)
		seg := s.mu.segs[l.seg]
		if err != nil || len(k) != 1+block.KeySize || seg == nil || l.off+l.recLen > seg.size {
			batch.Delete(k, nil)
			dropped++
			return
		}
		s.addEntryLocked(key, seg, l)
	})
	if err != nil {
		return err
	}
	markers := map[uint32]int64{}
	err = s.scanIndex(prefixMarker, func(k, v []byte) {
		if len(k) == 5 && len(v) == 8 {
			markers[binary.BigEndian.Uint32(k[1:])] = int64(binary.LittleEndian.Uint64(v))
		}
	})
	if err != nil {
		return err
	}

	segs := make([]*segment, 0, len(s.mu.segs))
	for _, seg := range s.mu.segs {
		segs = append(segs, seg)
	}
	slices.SortFunc(segs, func(a, b *segment) int { return cmp.Compare(a.id, b.id) })
	rescued := 0
	for _, seg := range segs {
		from := markers[seg.id]
		if from > seg.size {
			from = 0
		}
		n, err := s.rescan(seg, from, batch)
		if err != nil {
			return err
		}
		rescued += n
		seg.indexed = seg.size
	}
	if err := commitBatch(batch, pebble.Sync); err != nil {
		if pe := (*poisonedError)(nil); errors.As(err, &pe) {
			s.idxPoisoned.Store(true)
		}
		return fmt.Errorf("ssd: saving recovered index: %w", err)
	}
	for _, seg := range segs {
		s.mu.used += seg.size
	}
	for _, seg := range segs {
		s.maybeDropLocked(seg)
	}
	if rescued > 0 || dropped > 0 {
		s.opts.Logger.Info("ssd: recovered index", "blocks", len(s.mu.blocks), "reindexed", rescued, "dropped_stale", dropped)
	}
	// A tier reopened with a smaller capacity sheds segments now.
	for s.mu.used > s.opts.Capacity {
		v := s.pickVictimLocked()
		if v == nil {
			break
		}
		s.evictSegmentLocked(context.Background(), v)
	}
	return nil
}

func (s *SSD) addEntryLocked(key block.Key, seg *segment, l location) {
	e := &entry{seg: seg, off: l.off, recLen: l.recLen, hdr: l.hdr, pinnedUntil: l.pinnedUntil, meta: l.meta,
		retention: l.retention, retainUntil: l.retainUntil}
	s.startRetentionLocked(key, e)
	if e.pinnedUntil != 0 {
		if e.pinnedUntil > s.now() {
			s.mu.pinned += int64(e.hdr.RawLen)
			s.mu.pins.Push(e.pinnedUntil, key)
		} else {
			e.pinnedUntil = 0
		}
	}
	s.mu.blocks[key] = e
	seg.live += e.recLen
	seg.ranks[e.rank()] += e.recLen
	seg.keys = append(seg.keys, key)
}

func (s *SSD) scanIndex(prefix byte, fn func(k, v []byte)) error {
	it, err := s.idx.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return fmt.Errorf("ssd: reading index: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		fn(it.Key(), it.Value())
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("ssd: reading index: %w", err)
	}
	return nil
}

// rescan indexes the intact records of seg from offset from on, and cuts
// the file at the first record that is torn or fails verification: nothing
// after it was acknowledged, because acknowledgement waits for a flush that
// covers every earlier byte of the file. The exception is a record that
// failed to write (an I/O error, or a crash) while a later one in the same
// segment was written, flushed and indexed: the scan skips such a hole to
// the end of the last indexed record instead of cutting it off.
func (s *SSD) rescan(seg *segment, from int64, batch *pebble.Batch) (int, error) {
	n := 0
	off := from
	var indexedEnd int64 // end of the furthest record the index knows
	for _, k := range seg.keys {
		if e := s.mu.blocks[k]; e != nil && e.seg == seg {
			indexedEnd = max(indexedEnd, e.off+e.recLen)
		}
	}
	var hdrBuf [recHeaderSize]byte
	for off < seg.size {
		// bad handles a record that does not verify at off: it skips a
		// hole below indexed records and cuts a torn tail.
		bad := func(why string) (bool, error) {
			if off < indexedEnd {
				s.opts.Logger.Warn("ssd: skipping an unreadable record below indexed ones", "segment", segmentName(seg.id), "offset", off, "skipped_bytes", indexedEnd-off, "why", why)
				off = indexedEnd
				return true, nil
			}
			s.opts.Logger.Warn("ssd: cutting torn segment tail", "segment", segmentName(seg.id), "offset", off, "dropped_bytes", seg.size-off, "why", why)
			if err := seg.f.Truncate(off); err != nil {
				return false, fmt.Errorf("ssd: truncating %s: %w", segmentName(seg.id), err)
			}
			seg.size = off
			return false, nil
		}
		var why string
		var recLen int64
		var rh recHeader
		if _, err := seg.f.ReadAt(hdrBuf[:], off); err != nil {
			if !errors.Is(err, io.EOF) {
				return n, fmt.Errorf("ssd: reading %s: %w", segmentName(seg.id), err)
			}
			why = "short header"
		} else if rh, err = decodeRecHeader(hdrBuf[:]); err != nil {
			why = err.Error()
		} else if recLen = rh.recLen(); off+recLen > seg.size {
			why = "record runs past the end of the file"
		}
		var rec []byte
		if why == "" {
			e := &entry{seg: seg, off: off, recLen: recLen, hdr: rh.hdr}
			var err error
			rec, _, err = s.readFullRecord(seg, e, rh.key)
			if ioe := (*ioError)(nil); errors.As(err, &ioe) {
				// A device error is no proof of a torn record: cutting
				// here could drop acknowledged blocks. Fail the open.
				return n, fmt.Errorf("ssd: reading %s: %w", segmentName(seg.id), err)
			} else if err != nil {
				why = err.Error()
			}
		}
		if why != "" {
			more, err := bad(why)
			if err != nil || !more {
				return n, err
			}
			continue
		}
		l := location{seg: seg.id, off: off, recLen: recLen, hdr: rh.hdr}
		if rh.metaLen > 0 {
			l.meta = rec[recLen-int64(rh.metaLen):]
		}
		if _, ok := s.mu.blocks[rh.key]; !ok {
			s.addEntryLocked(rh.key, seg, l)
			batch.Set(blockIndexKey(rh.key), l.encode(), nil)
			n++
		}
		off += recLen
	}
	return n, nil
}
