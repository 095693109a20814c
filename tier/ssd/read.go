package ssd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// readFullRecord reads and verifies a record, returning it whole and its
// raw payload.
func (s *SSD) readFullRecord(seg *segment, e *entry, key block.Key) (rec, raw []byte, err error) {
	return s.readInto(make([]byte, e.recLen), seg, e, key)
}

// readInto reads and verifies a record into buf (e.recLen bytes).
func (s *SSD) readInto(buf []byte, seg *segment, e *entry, key block.Key) (rec, raw []byte, err error) {
	if _, err := seg.f.ReadAt(buf, e.off); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, fmt.Errorf("%w: record at %s:%d runs past the end of the file", block.ErrCorrupt, segmentName(seg.id), e.off)
		}
		// The device failed the read: the record may read fine later,
		// so it is kept (faults.go).
		return nil, nil, &ioError{op: opRead, err: fmt.Errorf("reading record at %s:%d: %w", segmentName(seg.id), e.off, err)}
	}
	if !s.opts.KeepPageCache {
		dropPages(seg.f, e.off, e.recLen)
	}
	rh, err := decodeRecHeader(buf)
	if err != nil {
		return nil, nil, err
	}
	if rh.key != key || rh.hdr != e.hdr || rh.recLen() != e.recLen {
		return nil, nil, fmt.Errorf("%w: record at %s:%d holds another block", block.ErrCorrupt, segmentName(seg.id), e.off)
	}
	storedEnd := recHeaderSize + int64(rh.hdr.StoredLen)
	if block.Checksum(buf[storedEnd:]) != rh.metaSum {
		return nil, nil, fmt.Errorf("%w: record at %s:%d: metadata checksum mismatch", block.ErrCorrupt, segmentName(seg.id), e.off)
	}
	hdr := rh.hdr
	raw, err = s.codec.decompress(buf[recHeaderSize:storedEnd], hdr)
	if err != nil {
		return nil, nil, err
	}
	if err := hdr.Verify(raw); err != nil {
		return nil, nil, err
	}
	return buf, raw, nil
}

// Get implements tier.Tier. It returns a private, verified copy.
func (s *SSD) Get(_ context.Context, key block.Key) (*tier.Handle, error) {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil, tier.ErrClosed
	}
	e, ok := s.mu.blocks[key]
	if !ok {
		s.mu.Unlock()
		s.misses.Add(1)
		return nil, tier.ErrNotFound
	}
	if e.mem != nil {
		mem := e.mem
		s.mu.Unlock()
		s.hits.Add(1)
		return tier.NewHandle(mem, e.hdr.Checksum, nil), nil
	}
	seg := e.seg
	seg.refs++
	seg.access.Store(s.tick.Add(1))
	s.mu.Unlock()

	pb := getBuf(int(e.recLen))
	_, raw, err := s.readInto(pb.b, seg, e, key)

	s.mu.Lock()
	s.releaseSegLocked(seg)
	if err != nil {
		pb.Release()
		if s.mu.closed {
			s.mu.Unlock()
			return nil, tier.ErrClosed
		}
		if ioe := (*ioError)(nil); errors.As(err, &ioe) {
			s.mu.Unlock()
			ioe.key, ioe.e = key, e
			s.fault(ioe)
			return nil, fmt.Errorf("ssd: block %v: %w", key, err)
		}
		if s.mu.blocks[key] == e {
			s.dropEntryLocked(key, e)
			s.corrupt.Add(1)
		}
		s.mu.Unlock()
		s.emptyTrash()
		s.opts.Logger.Error("ssd: dropping corrupt block", "key", key, "err", err)
		return nil, fmt.Errorf("ssd: block %v: %w", key, err)
	}
	s.mu.Unlock()
	s.hits.Add(1)
	if e.hdr.Codec != block.CodecNone {
		pb.Release() // raw was decompressed into its own buffer
		return tier.NewHandle(raw, e.hdr.Checksum, nil), nil
	}
	return tier.NewHandle(raw, e.hdr.Checksum, pb), nil
}

// Stat implements tier.Tier.
func (s *SSD) Stat(key block.Key) (tier.BlockInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.mu.blocks[key]
	if !ok {
		return tier.BlockInfo{}, tier.ErrNotFound
	}
	return e.info(), nil
}

func (e *entry) info() tier.BlockInfo {
	var version uint64 // a record's place in the log names the copy
	if e.seg != nil {
		version = uint64(e.seg.id)<<40 | uint64(e.off)
	}
	return e.withRetention(blockInfo(e.hdr, e.meta, e.pinnedUntil, version))
}

// blockInfo is what Stat and Range report for a stored block of either
// layout: the header knows the size and checksum.
func blockInfo(hdr block.Header, meta []byte, pinnedUntil int64, version uint64) tier.BlockInfo {
	info := tier.BlockInfo{Size: int64(hdr.RawLen), Checksum: hdr.Checksum, HasChecksum: true, Meta: meta, Version: version}
	if pinnedUntil != 0 {
		info.PinnedUntil = time.Unix(0, pinnedUntil)
	}
	return info
}

// Range implements tier.Tier.
func (s *SSD) Range(fn func(block.Key, tier.BlockInfo) bool) {
	s.mu.Lock()
	items := make([]tier.KeyInfo, 0, len(s.mu.blocks))
	for k, e := range s.mu.blocks {
		items = append(items, tier.KeyInfo{Key: k, Info: e.info()})
	}
	s.mu.Unlock()
	tier.Visit(items, fn)
}
