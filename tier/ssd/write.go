package ssd

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"golang.org/x/sys/unix"
)

// Put implements tier.Tier.
func (s *SSD) Put(ctx context.Context, key block.Key, value []byte, opts tier.PutOptions) error {
	if int64(len(value)) > s.opts.MaxBlockSize {
		return fmt.Errorf("%w: %d bytes, the SSD tier takes at most %d", tier.ErrTooLarge, len(value), s.opts.MaxBlockSize)
	}
	if len(opts.Meta) > tier.MaxMeta {
		return fmt.Errorf("%w: %d bytes, at most %d", tier.ErrMeta, len(opts.Meta), tier.MaxMeta)
	}
	sum := block.Checksum(value)
	if opts.HasChecksum && sum != opts.Checksum {
		return fmt.Errorf("%w: got crc32c %08x, want %08x", tier.ErrChecksum, sum, opts.Checksum)
	}
	if s.contains(key) {
		return tier.ErrExists
	}
	if err := s.refuse(); err != nil {
		return err
	}
	stored, kind := s.codec.compress(value)
	hdr := block.Header{Codec: kind, RawLen: uint32(len(value)), StoredLen: uint32(len(stored)), Checksum: sum}
	meta := append([]byte(nil), opts.Meta...)
	if !opts.Retention.Valid() {
		return fmt.Errorf("ssd: %w: %v", tier.ErrRetention, opts.Retention)
	}
	ret := retention{r: opts.Retention, until: tier.UnixNanos(opts.RetainUntil)}
	return s.write(ctx, key, hdr, stored, meta, pinNanos(opts.PinnedUntil), ret, nil)
}

// Create implements tier.Tier. The block is buffered in memory until Commit:
// the record's header, written first, needs the checksum of all of it.
func (s *SSD) Create(ctx context.Context, key block.Key, size int64, opts tier.PutOptions) (tier.Writer, error) {
	if size < 0 {
		return nil, fmt.Errorf("ssd: negative block size %d", size)
	}
	if size > s.opts.MaxBlockSize {
		return nil, fmt.Errorf("%w: %d bytes, the SSD tier takes at most %d", tier.ErrTooLarge, size, s.opts.MaxBlockSize)
	}
	if s.contains(key) {
		return nil, tier.ErrExists
	}
	if err := s.refuse(); err != nil {
		return nil, err
	}
	return &bufWriter{buf: make([]byte, 0, size), size: int(size), commit: func(ctx context.Context, v []byte) error {
		return s.Put(ctx, key, v, opts)
	}}, nil
}

func (s *SSD) contains(key block.Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.mu.blocks[key]
	return ok
}

// write stores one record and indexes it. replacing, when set, is the entry
// of a pinned block being copied forward; its space was accounted for when
// its segment was dropped (see evictSegmentLocked), and the new record takes
// its place only if it is still the key's entry.
func (s *SSD) write(ctx context.Context, key block.Key, hdr block.Header, stored, meta []byte, pinnedUntil int64, ret retention, replacing *entry) error {
	recLen := recHeaderSize + int64(len(stored)) + int64(len(meta))
	seg, off, err := s.reserve(ctx, recLen, replacing != nil)
	if err != nil {
		if ioe := (*ioError)(nil); errors.As(err, &ioe) {
			s.fault(ioe)
		}
		return err
	}
	var hb [recHeaderSize]byte
	encodeRecHeader(hb[:], key, hdr, meta)
	var ioe *ioError
	if err = writeFull(seg.f, [][]byte{hb[:], stored, meta}, off); err != nil {
		ioe = &ioError{op: opWrite, err: err}
	} else if !s.opts.NoSync {
		if err = seg.flush.wait(seg.f); err != nil {
			ioe = &ioError{op: opSync, err: err}
		} else if !s.opts.KeepPageCache {
			dropPages(seg.f, off, recLen)
		}
	}

	defer s.emptyTrash()
	s.mu.Lock()
	s.mu.writers--
	seg.writers--
	s.releaseSegLocked(seg)
	if s.mu.closed {
		s.signalLocked() // Close waits for writers
	}
	if ioe != nil {
		// The segment is done: its flush state is unknown after a failed
		// fdatasync, and a failed write left a hole in it. New puts go to
		// a new file once the probe finds the device well (faults.go).
		seg.failed, seg.sealed = true, true
		if s.mu.active == seg {
			s.mu.active = nil
		}
		s.maybeDropLocked(seg)
		s.mu.Unlock()
		s.fault(ioe)
		return fmt.Errorf("ssd: writing block: %w", ioe)
	}
	cur, exists := s.mu.blocks[key]
	if replacing == nil && exists || replacing != nil && cur != replacing {
		// Another put of the key won, or the pinned block was deleted while
		// being copied: this record is dead space.
		s.maybeDropLocked(seg)
		s.mu.Unlock()
		if replacing != nil {
			return nil
		}
		return tier.ErrExists
	}
	if s.mu.closed {
		s.mu.Unlock()
		return tier.ErrClosed
	}
	e := &entry{seg: seg, off: off, recLen: recLen, hdr: hdr, meta: meta, retention: ret.r, retainUntil: ret.until}
	if replacing != nil {
		// The class may have changed while the block was carried.
		e.retention, e.retainUntil = replacing.retention, replacing.retainUntil
	}
	s.startRetentionLocked(key, e)
	if replacing != nil {
		e.pinnedUntil = replacing.pinnedUntil
	} else if pinnedUntil > s.now() && s.mu.pinned+int64(hdr.RawLen) <= s.opts.pinLimit() {
		e.pinnedUntil = pinnedUntil
		s.mu.pinned += int64(hdr.RawLen)
		s.mu.pins.Push(pinnedUntil, key)
	}
	s.mu.blocks[key] = e
	seg.live += recLen
	seg.ranks[e.rank()] += recLen
	seg.keys = append(seg.keys, key)
	seg.indexed = max(seg.indexed, off+recLen)
	marker := seg.indexed
	loc := e.location()
	if replacing == nil {
		s.puts.Add(1)
	}
	s.mu.Unlock()

	// A failed index write does not fail the put: the record is durable,
	// the rescan at the next open finds it, and the block is served
	// meanwhile from the in-memory map.
	s.indexWrite(func(b *pebble.Batch) {
		b.Set(blockIndexKey(key), loc.encode(), nil)
		var m [8]byte
		putUint64(m[:], uint64(marker))
		b.Set(markerKey(seg.id), m[:], nil)
	})
	return nil
}

// dropPages asks the kernel to drop the clean pages around a file range from
// the page cache. Neighbours' pages dropped with it are at most read again
// from the device; dirty ones are left alone. It is advice: an error changes
// nothing the tier relies on.
func dropPages(f File, off, n int64) {
	start := off &^ (dropAlign - 1)
	end := (off + n + dropAlign - 1) &^ (dropAlign - 1)
	fadvise(f, start, end-start, unix.FADV_DONTNEED)
}

// Delete implements tier.Tier.
func (s *SSD) Delete(key block.Key) error {
	e, err := s.lockedEntry(key)
	if err != nil {
		return err
	}
	delete(s.mu.blocks, key)
	if e.pinnedUntil != 0 {
		s.mu.pinned -= int64(e.hdr.RawLen)
	}
	if e.seg != nil {
		e.seg.live -= e.recLen
		e.seg.ranks[e.rank()] -= e.recLen
		s.maybeDropLocked(e.seg)
	}
	s.mu.trash.keys = append(s.mu.trash.keys, key)
	s.mu.Unlock()
	s.deletes.Add(1)
	s.emptyTrash()
	return nil
}

// bufWriter collects a block in memory and stores it on Commit.
type bufWriter struct {
	buf    []byte
	size   int
	done   bool
	commit func(context.Context, []byte) error
}

func (w *bufWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errors.New("ssd: write to a finished writer")
	}
	if len(w.buf)+len(p) > w.size {
		return 0, fmt.Errorf("%w: writing %d bytes past the reserved %d", tier.ErrSize, len(w.buf)+len(p)-w.size, w.size)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// ReadFrom reads r until EOF into the buffer; input beyond the reserved
// size is an ErrSize error.
func (w *bufWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.done {
		return 0, errors.New("ssd: write to a finished writer")
	}
	start := len(w.buf)
	for len(w.buf) < w.size {
		n, err := r.Read(w.buf[len(w.buf):w.size])
		w.buf = w.buf[:len(w.buf)+n]
		if err == io.EOF {
			return int64(len(w.buf) - start), nil
		}
		if err != nil {
			return int64(len(w.buf) - start), err
		}
	}
	var probe [1]byte
	for {
		n, err := r.Read(probe[:])
		if n > 0 {
			return int64(len(w.buf) - start), fmt.Errorf("%w: input is longer than the reserved %d bytes", tier.ErrSize, w.size)
		}
		if err == io.EOF {
			return int64(len(w.buf) - start), nil
		}
		if err != nil {
			return int64(len(w.buf) - start), err
		}
	}
}

func (w *bufWriter) Commit(ctx context.Context) error {
	if w.done {
		return errors.New("ssd: commit of a finished writer")
	}
	w.done = true
	if len(w.buf) != w.size {
		return fmt.Errorf("%w: wrote %d of %d bytes", tier.ErrSize, len(w.buf), w.size)
	}
	return w.commit(ctx, w.buf)
}

func (w *bufWriter) Abort() { w.done = true; w.buf = nil }
