package ssd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/yuebing/yuebing/block"
)

// RecordInfo describes one record ScanRecords found in a segment file.
type RecordInfo struct {
	Key block.Key
	// Segment is the file's name, Offset the record's position in it.
	Segment string
	Offset  int64
	// Size and Checksum are the block's raw length and CRC-32C.
	Size     int64
	Checksum uint32
}

// ScanRecords reads the segment files under dir (a tier's Options.Dir) and
// calls fn for every record that verifies — header, metadata and payload
// checksums, after decompression — in file order, oldest file first. It
// reads without the index and writes nothing, so it can inspect the
// directory of a tier no process has open, such as one whose process was
// killed: what it reports is what the next Open can recover from the files.
// A file is read up to its first record that does not verify (a torn tail;
// a hole below later records is not skipped, as without the index it
// cannot be told from one). An error from fn stops the scan and is
// returned.
func ScanRecords(dir string, fn func(RecordInfo) error) error {
	segDir := filepath.Join(dir, "segments")
	ents, err := os.ReadDir(segDir)
	if err != nil {
		return fmt.Errorf("ssd: scanning %s: %w", segDir, err)
	}
	var ids []uint32
	for _, e := range ents {
		if id, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	c, err := newCodec(block.CodecNone, block.MaxPayload)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := scanSegment(filepath.Join(segDir, segmentName(id)), c, fn); err != nil {
			return err
		}
	}
	return nil
}

func scanSegment(path string, c *codec, fn func(RecordInfo) error) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // removed since the listing: its records are gone
	}
	if err != nil {
		return fmt.Errorf("ssd: scanning: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("ssd: scanning: %w", err)
	}
	var hdrBuf [recHeaderSize]byte
	var buf []byte
	for off := int64(0); off+recHeaderSize <= st.Size(); {
		if _, err := f.ReadAt(hdrBuf[:], off); err != nil {
			return fmt.Errorf("ssd: scanning %s: %w", path, err)
		}
		rh, err := decodeRecHeader(hdrBuf[:])
		if err != nil || off+rh.recLen() > st.Size() {
			return nil // torn tail
		}
		recLen := rh.recLen()
		if int64(cap(buf)) < recLen {
			buf = make([]byte, recLen)
		}
		buf = buf[:recLen]
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("ssd: scanning %s: %w", path, err)
		}
		storedEnd := recHeaderSize + int64(rh.hdr.StoredLen)
		if block.Checksum(buf[storedEnd:]) != rh.metaSum {
			return nil
		}
		raw, err := c.decompress(buf[recHeaderSize:storedEnd], rh.hdr)
		if err != nil || rh.hdr.Verify(raw) != nil {
			return nil
		}
		info := RecordInfo{Key: rh.key, Segment: filepath.Base(path), Offset: off, Size: int64(rh.hdr.RawLen), Checksum: rh.hdr.Checksum}
		if err := fn(info); err != nil {
			return err
		}
		off += recLen
	}
	return nil
}
