package ssd

import (
	"encoding/binary"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/yuebing/yuebing/block"
)

// The persisted index, in pebble:
//
//	'b' key(32)     -> location: segment u32, offset u64, record length u32,
//	                   codec u8, raw length u32, stored length u32,
//	                   crc u32, pinned-until i64 (Unix ns), metadata
//	                   length u16, then the metadata
//	'm' segment(4)  -> u64: every record below this offset is indexed
//
// All writes are NoSync: durability comes from the segment's fdatasync, and
// the markers bound how much of each segment a restart must rescan.
const (
	prefixBlock  = 'b'
	prefixMarker = 'm'
	locationSize = 39 // without the metadata
)

func blockIndexKey(k block.Key) []byte {
	b := make([]byte, 1+block.KeySize)
	b[0] = prefixBlock
	copy(b[1:], k[:])
	return b
}

func markerKey(seg uint32) []byte {
	b := []byte{prefixMarker, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], seg)
	return b
}

type location struct {
	seg         uint32
	off         int64
	recLen      int64
	hdr         block.Header
	pinnedUntil int64
	meta        []byte
}

func (l location) encode() []byte {
	b := make([]byte, locationSize+len(l.meta))
	binary.LittleEndian.PutUint32(b[0:], l.seg)
	binary.LittleEndian.PutUint64(b[4:], uint64(l.off))
	binary.LittleEndian.PutUint32(b[12:], uint32(l.recLen))
	b[16] = byte(l.hdr.Codec)
	binary.LittleEndian.PutUint32(b[17:], l.hdr.RawLen)
	binary.LittleEndian.PutUint32(b[21:], l.hdr.StoredLen)
	binary.LittleEndian.PutUint32(b[25:], l.hdr.Checksum)
	binary.LittleEndian.PutUint64(b[29:], uint64(l.pinnedUntil))
	binary.LittleEndian.PutUint16(b[37:], uint16(len(l.meta)))
	copy(b[locationSize:], l.meta)
	return b
}

func decodeLocation(b []byte) (location, error) {
	if len(b) < locationSize || len(b) != locationSize+int(binary.LittleEndian.Uint16(b[37:])) {
		return location{}, fmt.Errorf("ssd: index entry is %d bytes, which its metadata length does not explain", len(b))
	}
	l := location{
		seg:    binary.LittleEndian.Uint32(b[0:]),
		off:    int64(binary.LittleEndian.Uint64(b[4:])),
		recLen: int64(binary.LittleEndian.Uint32(b[12:])),
		hdr: block.Header{
			Codec:     block.Codec(b[16]),
			RawLen:    binary.LittleEndian.Uint32(b[17:]),
			StoredLen: binary.LittleEndian.Uint32(b[21:]),
			Checksum:  binary.LittleEndian.Uint32(b[25:]),
		},
		pinnedUntil: int64(binary.LittleEndian.Uint64(b[29:])),
	}
	if len(b) > locationSize {
		l.meta = append([]byte(nil), b[locationSize:]...)
	}
	if l.recLen != recHeaderSize+int64(l.hdr.StoredLen)+int64(len(l.meta)) || l.off < 0 {
		return location{}, fmt.Errorf("ssd: index entry is inconsistent: record %d bytes for %d stored", l.recLen, l.hdr.StoredLen)
	}
	return l, nil
}

func openPebble(dir string, cacheSize int64, fs vfs.FS, log *slog.Logger) (db *pebble.DB, err error) {
	cache := pebble.NewCache(cacheSize)
	defer cache.Unref()
	defer catchFatal(&err)
	db, err = pebble.Open(dir, &pebble.Options{Cache: cache, FS: fs, Logger: pebbleLogger{log}})
	if err != nil {
		return nil, fmt.Errorf("ssd: opening index in %s: %w", dir, err)
	}
	return db, nil
}

// pebbleFatal is what pebble's Fatalf panics with. Pebble calls it when a
// WAL write fails ("the commit pipeline will be horked"); the tier catches
// it where it commits, treats the index as failed and reopens it later
// (faults.go). A Fatalf on one of pebble's own goroutines still ends the
// process, as pebble intends.
type pebbleFatal string

func (f pebbleFatal) Error() string { return string(f) }

// catchFatal turns a pebbleFatal panic into *err; other panics go on.
func catchFatal(err *error) {
	if r := recover(); r != nil {
		f, ok := r.(pebbleFatal)
		if !ok {
			panic(r)
		}
		*err = f
	}
}

// commitBatch commits b, turning pebble's fatal commit error into an error.
func commitBatch(b *pebble.Batch, wo *pebble.WriteOptions) (err error) {
	defer catchFatal(&err)
	defer b.Close()
	return b.Commit(wo)
}

// pebbleSet and pebbleDelete are db.Set and db.Delete (NoSync) with
// pebble's fatal commit error turned into an error.
func pebbleSet(db *pebble.DB, k, v []byte, wo *pebble.WriteOptions) (err error) {
	defer catchFatal(&err)
	return db.Set(k, v, wo)
}

func pebbleDelete(db *pebble.DB, k []byte) (err error) {
	defer catchFatal(&err)
	return db.Delete(k, pebble.NoSync)
}

// flushIndex flushes a healthy pebble instance's memtable.
func flushIndex(db *pebble.DB) (err error) {
	defer catchFatal(&err)
	return db.Flush()
}

// closeIndex closes a pebble instance, possibly a failed one, ignoring
// what a failed one reports.
func closeIndex(db *pebble.DB) (err error) {
	defer catchFatal(&err)
	return db.Close()
}

// pebbleLogger routes pebble's log lines to slog; its routine chatter
// (flushes, compactions) goes to debug.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	panic(pebbleFatal("pebble: " + fmt.Sprintf(format, args...)))
}
