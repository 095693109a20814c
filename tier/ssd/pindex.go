package ssd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// The persisted index, in pebble:
//
//	'b' key(32)     -> location: segment u32, offset u64, record length u32,
//	                   codec u8, raw length u32, stored length u32,
//	                   crc u32, pinned-until i64 (Unix ns), metadata
//	                   length u16, then the metadata, then, for a block
//	                   of a class other than Normal, retention u8 and
//	                   retain-until i64 (Unix ns; 0: no end)
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
	retention   tier.Retention
	retainUntil int64
}

// retentionSize is the optional trailer that records a class. Normal
// blocks go without it, so their entries read the same in every version.
const retentionSize = 9

func (l location) encode() []byte {
	n := locationSize + len(l.meta)
	if l.retention != tier.RetentionNormal {
		n += retentionSize
	}
	b := make([]byte, n)
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
	if n > locationSize+len(l.meta) {
		t := b[locationSize+len(l.meta):]
		t[0] = byte(l.retention)
		binary.LittleEndian.PutUint64(t[1:], uint64(l.retainUntil))
	}
	return b
}

func decodeLocation(b []byte) (location, error) {
	if len(b) < locationSize {
		return location{}, fmt.Errorf("ssd: index entry is %d bytes, which its metadata length does not explain", len(b))
	}
	end := locationSize + int(binary.LittleEndian.Uint16(b[37:]))
	if len(b) != end && len(b) != end+retentionSize {
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
	if end > locationSize {
		l.meta = append([]byte(nil), b[locationSize:end]...)
	}
	if len(b) > end {
		l.retention = tier.Retention(b[end])
		l.retainUntil = int64(binary.LittleEndian.Uint64(b[end+1:]))
		if !l.retention.Valid() || l.retention == tier.RetentionNormal || l.retainUntil < 0 {
			return location{}, fmt.Errorf("ssd: index entry has retention %d until %d", b[end], l.retainUntil)
		}
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
// commit's WAL write fails; the tier catches it where it commits and
// treats the index as failed (faults.go). A Fatalf on one of pebble's own
// goroutines still ends the process, as pebble intends.
type pebbleFatal string

func (f pebbleFatal) Error() string { return string(f) }

// poisonedError is a panic pebble raised with an error from inside its
// commit pipeline (a WAL write that failed), with the pipeline's mutex
// still held: every later write to that instance, and its Close, would
// block forever. The instance is abandoned, never touched again.
type poisonedError struct{ err error }

func (e *poisonedError) Error() string { return "pebble: commit pipeline failed: " + e.err.Error() }
func (e *poisonedError) Unwrap() error { return e.err }

// catchFatal turns pebble's panics on a failed commit into *err: a
// pebbleFatal as itself, an error as a poisonedError. Other panics go on.
func catchFatal(err *error) {
	if r := recover(); r != nil {
		switch v := r.(type) {
		case pebbleFatal:
			*err = v
		case error:
			*err = &poisonedError{v}
		default:
			panic(r)
		}
	}
}

// commitBatch commits b, turning pebble's panics on a failed commit into
// errors.
func commitBatch(b *pebble.Batch, wo *pebble.WriteOptions) (err error) {
	defer catchFatal(&err)
	defer b.Close()
	return b.Commit(wo)
}

// flushIndex syncs the WAL and, if that works, flushes the memtable. A
// failed WAL may go unnoticed until then (pebble writes it behind NoSync
// commits), and pebble's Flush panics beyond recovery on a failed WAL, so
// the sync comes first.
func flushIndex(db *pebble.DB) (err error) {
	defer catchFatal(&err)
	if err := db.LogData(nil, pebble.Sync); err != nil {
		return err
	}
	return db.Flush()
}

// closeIndex closes a pebble instance that is not poisoned.
func closeIndex(db *pebble.DB) (err error) {
	defer catchFatal(&err)
	return db.Close()
}

// The index lives in Dir/index, or in the directory the file Dir/INDEX
// names: after a failure the tier rebuilds the index in a fresh directory,
// index.N, because a poisoned pebble instance cannot be closed and keeps
// its directory locked until the process exits.
const (
	indexPointer = "INDEX"
	indexDir0    = "index"
)

// indexDirName checks a name read from INDEX.
func indexDirName(name string) (gen int, ok bool) {
	if name == indexDir0 {
		return 0, true
	}
	n, ok := strings.CutPrefix(name, indexDir0+".")
	if !ok {
		return 0, false
	}
	g, err := strconv.Atoi(n)
	return g, err == nil && g > 0 && strconv.Itoa(g) == n
}

// readIndexPointer returns the generation of the current index directory.
func readIndexPointer(fs vfs.FS, dir string) (int, error) {
	f, err := fs.Open(filepath.Join(dir, indexPointer))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("ssd: reading %s: %w", indexPointer, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, fmt.Errorf("ssd: reading %s: %w", indexPointer, err)
	}
	gen, ok := indexDirName(strings.TrimSpace(string(b)))
	if !ok {
		return 0, fmt.Errorf("ssd: %s names %q, not an index directory", indexPointer, b)
	}
	return gen, nil
}

func indexDirOf(gen int) string {
	if gen == 0 {
		return indexDir0
	}
	return indexDir0 + "." + strconv.Itoa(gen)
}

// writeIndexPointer makes gen the current index directory, atomically.
func writeIndexPointer(fs vfs.FS, dir string, gen int) error {
	tmp := filepath.Join(dir, indexPointer+".tmp")
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(indexDirOf(gen) + "\n"))
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = fs.Rename(tmp, filepath.Join(dir, indexPointer))
	}
	if err != nil {
		return fmt.Errorf("ssd: writing %s: %w", indexPointer, err)
	}
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// removeStaleIndexes removes index directories other than gen's, left by a
// failure; a failure to remove one costs only disk space.
func removeStaleIndexes(fs vfs.FS, dir string, gen int, log *slog.Logger) {
	names, err := fs.List(dir)
	if err != nil {
		return
	}
	for _, name := range names {
		if g, ok := indexDirName(name); ok && g != gen {
			if err := fs.RemoveAll(filepath.Join(dir, name)); err != nil {
				log.Warn("ssd: removing a stale index directory", "dir", name, "err", err)
			}
		}
	}
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
