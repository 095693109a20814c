package ssd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/expiry"
	"github.com/yuebing/yuebing/tier"
)

// SSD is the segment-file SSD tier. It is safe for concurrent use.
//
// One mutex guards the block map and the segment table; reads, writes,
// fsyncs and file creation all happen outside it.
type SSD struct {
	opts    Options
	segDir  string
	codec   *codec
	onEvict atomic.Pointer[tier.EvictHandler]
	tick    atomic.Int64

	mu struct {
		sync.Mutex
		blocks   map[block.Key]*entry
		segs     map[uint32]*segment
		active   *segment
		nextID   uint32
		creating bool
		used     int64
		pinned   int64
		pins     expiry.Heap[block.Key]
		writers  int
		space    chan struct{} // closed and replaced when space is freed or a segment is ready
		closed   bool
		dbClosed bool
		// trash is index entries and files to remove once the lock is
		// released; see emptyTrash.
		trash struct {
			keys  []block.Key
			segs  []*segment
			count int
		}
	}
	counters

	// idx is the pebble index. Writers hold the read lock; the probe
	// takes the write lock to replace a failed instance (faults.go).
	idx struct {
		sync.RWMutex
		db  *pebble.DB
		gen int // the index directory's generation (indexDirOf)
	}
	idxFailed   atomic.Bool // the index lost writes: skip it until reopened
	idxPoisoned atomic.Bool // and its instance must never be touched again
	health      health
	probes      sync.WaitGroup
	probeStop   chan struct{}
}

var (
	_ tier.Tier          = (*SSD)(nil)
	_ tier.EvictNotifier = (*SSD)(nil)
)

// entry is a stored block. Guarded by the tier's mutex.
type entry struct {
	seg         *segment // nil while the block is being copied forward
	off         int64
	recLen      int64
	hdr         block.Header
	pinnedUntil int64
	meta        []byte
	mem         []byte // the raw payload while seg is nil
}

func (e *entry) location() location {
	l := location{off: e.off, recLen: e.recLen, hdr: e.hdr, pinnedUntil: e.pinnedUntil, meta: e.meta}
	if e.seg != nil {
		l.seg = e.seg.id
	}
	return l
}

// Open opens or creates the tier in opts.Dir, recovering what a crash left.
func Open(opts Options) (*SSD, error) {
	opts.EnsureDefaults()
	p, err := opts.check()
	if err != nil {
		return nil, err
	}
	c, err := newCodec(p.codec, opts.MaxBlockSize)
	if err != nil {
		return nil, err
	}
	s := &SSD{opts: opts, segDir: filepath.Join(opts.Dir, "segments"), codec: c, probeStop: make(chan struct{})}
	s.mu.blocks = make(map[block.Key]*entry)
	s.mu.segs = make(map[uint32]*segment)
	s.mu.space = make(chan struct{})
	if err := opts.Files.MkdirAll(s.segDir, 0o755); err != nil {
		c.close()
		return nil, fmt.Errorf("ssd: %w", err)
	}
	s.idx.gen, err = readIndexPointer(opts.IndexFS, opts.Dir)
	if err != nil {
		c.close()
		return nil, err
	}
	s.idx.db, err = openPebble(filepath.Join(opts.Dir, indexDirOf(s.idx.gen)), opts.IndexCacheSize, opts.IndexFS, opts.Logger)
	if err != nil {
		c.close()
		return nil, err
	}
	if err := s.recover(); err != nil {
		s.shutIndex(s.idx.db, false)
		s.mu.Lock()
		for _, seg := range s.mu.segs {
			seg.f.Close()
		}
		s.mu.Unlock()
		c.close()
		return nil, err
	}
	for _, seg := range s.mu.segs {
		s.adviseRandom(seg.f)
	}
	removeStaleIndexes(opts.IndexFS, opts.Dir, s.idx.gen, opts.Logger)
	return s, nil
}

// adviseRandom turns off the kernel's read-ahead on a segment once it is
// recovered. A record is read whole in one large pread, so read-ahead adds
// nothing to it; it would only read the neighbouring records, which the
// tier then leaves in the page cache (it drops just the record it read):
// device bandwidth spent on blocks nobody asked for, and memory held
// outside both tiers' capacities.
func (s *SSD) adviseRandom(f File) {
	if !s.opts.KeepPageCache {
		fadvise(f, 0, 0, unix.FADV_RANDOM)
	}
}

// Name implements tier.Tier.
func (s *SSD) Name() string { return s.opts.Name }

// SetEvictHandler implements tier.EvictNotifier. The handler gets a nil
// Handle: the SSD tier is a hierarchy's bottom, where eviction means gone.
func (s *SSD) SetEvictHandler(fn tier.EvictHandler) { s.onEvict.Store(&fn) }

func (s *SSD) now() int64 { return s.opts.Now().UnixNano() }

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
	return s.write(ctx, key, hdr, stored, meta, pinNanos(opts.PinnedUntil), nil)
}

func pinNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
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
func (s *SSD) write(ctx context.Context, key block.Key, hdr block.Header, stored, meta []byte, pinnedUntil int64, replacing *entry) error {
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
	e := &entry{seg: seg, off: off, recLen: recLen, hdr: hdr, meta: meta}
	if replacing != nil {
		e.pinnedUntil = replacing.pinnedUntil
	} else if pinnedUntil > s.now() && s.mu.pinned+int64(hdr.RawLen) <= s.opts.pinLimit() {
		e.pinnedUntil = pinnedUntil
		s.mu.pinned += int64(hdr.RawLen)
		s.mu.pins.Push(pinnedUntil, key)
	}
	s.mu.blocks[key] = e
	seg.live += recLen
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

// dropAlign is the granule dropPages widens its range to. The kernel drops
// only pages (and large folios) that lie wholly inside the range, so the
// exact range of a record, which rarely starts or ends on a page boundary,
// leaves the pages it shares with its neighbours cached; on kernels with
// large page-cache folios that is most of the segment.
const dropAlign = 2 << 20

// dropPages asks the kernel to drop the clean pages around a file range from
// the page cache. Neighbours' pages dropped with it are at most read again
// from the device; dirty ones are left alone. It is advice: an error changes
// nothing the tier relies on.
func dropPages(f File, off, n int64) {
	start := off &^ (dropAlign - 1)
	end := (off + n + dropAlign - 1) &^ (dropAlign - 1)
	fadvise(f, start, end-start, unix.FADV_DONTNEED)
}

// indexWrite commits an index update built by fill, unless the index has
// failed: then the in-memory map is the truth until the probe reopens the
// index and rewrites it from the map (faults.go).
func (s *SSD) indexWrite(fill func(b *pebble.Batch)) {
	s.idx.RLock()
	defer s.idx.RUnlock()
	if s.idx.db == nil || s.idxFailed.Load() {
		return
	}
	b := s.idx.db.NewBatch()
	fill(b)
	if err := commitBatch(b, pebble.NoSync); err != nil {
		s.indexFault(err)
	}
}

// indexFault records a failed index commit.
func (s *SSD) indexFault(err error) {
	if pe := (*poisonedError)(nil); errors.As(err, &pe) {
		s.idxPoisoned.Store(true)
	}
	s.fault(&ioError{op: opIndex, err: err})
}

// shutIndex closes an index instance, flushing it first if asked, unless
// it is poisoned: then it is left alone (see poisonedError).
func (s *SSD) shutIndex(db *pebble.DB, flush bool) error {
	if db == nil || s.idxPoisoned.Load() {
		return nil
	}
	if !flush || s.idxFailed.Load() {
		closeIndex(db) // what it lost, the next open's rescan finds
		return nil
	}
	if err := flushIndex(db); err != nil {
		if pe := (*poisonedError)(nil); !errors.As(err, &pe) {
			closeIndex(db)
		}
		return err
	}
	return closeIndex(db)
}

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
func (s *SSD) pickVictimLocked() *segment {
	var victim *segment
	for _, seg := range s.mu.segs {
		if seg.draining || seg.dropped || seg.writers > 0 {
			continue
		}
		if victim == nil || seg.access.Load() < victim.access.Load() {
			victim = seg
		}
	}
	return victim
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
	var evicted []block.Key
	type pinnedBlock struct {
		key block.Key
		e   *entry
	}
	var pinned []pinnedBlock
	for _, k := range v.keys {
		e := s.mu.blocks[k]
		if e == nil || e.seg != v {
			continue
		}
		if e.pinnedUntil != 0 {
			pinned = append(pinned, pinnedBlock{k, e})
			continue
		}
		delete(s.mu.blocks, k)
		v.live -= e.recLen
		evicted = append(evicted, k)
	}
	s.evictions.Add(int64(len(evicted)))
	v.refs++ // hold the file open while copying pinned blocks out
	s.mu.Unlock()

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
		for _, k := range evicted {
			(*h)(ctx, k, tier.BlockInfo{}, nil)
		}
	}
	// The pinned blocks are others' and their room is paid for: the put
	// whose need for room began this eviction may give up (its caller
	// gone), but their copy must not. Without cancellation the write waits
	// at most for a segment another put is creating.
	keep := context.WithoutCancel(ctx)
	for i, p := range carry {
		stored := carried[i][recHeaderSize : recHeaderSize+int64(p.e.hdr.StoredLen)]
		if err := s.write(keep, p.key, p.e.hdr, stored, p.e.meta, 0, p.e); err != nil {
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
	return blockInfo(e.hdr, e.meta, e.pinnedUntil, version)
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

// Delete implements tier.Tier.
func (s *SSD) Delete(key block.Key) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return tier.ErrClosed
	}
	e, ok := s.mu.blocks[key]
	if !ok {
		s.mu.Unlock()
		return tier.ErrNotFound
	}
	delete(s.mu.blocks, key)
	if e.pinnedUntil != 0 {
		s.mu.pinned -= int64(e.hdr.RawLen)
	}
	if e.seg != nil {
		e.seg.live -= e.recLen
		s.maybeDropLocked(e.seg)
	}
	s.mu.trash.keys = append(s.mu.trash.keys, key)
	s.mu.Unlock()
	s.deletes.Add(1)
	s.emptyTrash()
	return nil
}

// Pin implements tier.Tier. The pin is persisted with the block's location.
func (s *SSD) Pin(key block.Key, until time.Time) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return tier.ErrClosed
	}
	e, ok := s.mu.blocks[key]
	if !ok {
		s.mu.Unlock()
		return tier.ErrNotFound
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

// Stats implements tier.Tier.
func (s *SSD) Stats() tier.Stats {
	s.mu.Lock()
	s.expirePinsLocked()
	st := tier.Stats{
		Name: s.opts.Name, Capacity: s.opts.Capacity, Used: s.mu.used,
		Blocks: int64(len(s.mu.blocks)), Pinned: s.mu.pinned,
	}
	s.mu.Unlock()
	s.counters.addTo(&st)
	return st
}

// counters are the operation counts both layouts report in Stats.
type counters struct {
	hits, misses, puts, deletes, evictions, corrupt atomic.Int64
}

func (c *counters) addTo(st *tier.Stats) {
	st.Hits, st.Misses, st.Puts = c.hits.Load(), c.misses.Load(), c.puts.Load()
	st.Deletes, st.Evictions, st.Corrupt = c.deletes.Load(), c.evictions.Load(), c.corrupt.Load()
}

// Close implements tier.Tier: it waits for puts in flight, flushes the
// active segment and the index, and closes every file.
func (s *SSD) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.signalLocked()
	s.mu.Unlock()
	s.health.mu.Lock()
	s.health.stopped = true
	s.health.mu.Unlock()
	close(s.probeStop)
	s.probes.Wait()
	s.mu.Lock()
	for s.mu.writers > 0 {
		ch := s.mu.space
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	segs := make([]*segment, 0, len(s.mu.segs))
	for _, seg := range s.mu.segs {
		if seg.failed {
			seg.f.Close() // never flushed again (faults.go)
			continue
		}
		segs = append(segs, seg)
	}
	s.mu.Unlock()
	s.emptyTrash()
	s.mu.Lock()
	for s.mu.trash.count > 0 {
		ch := s.mu.space
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	s.mu.dbClosed = true
	s.mu.Unlock()
	var errs []error
	for _, seg := range segs {
		if err := seg.flush.wait(seg.f); err != nil {
			errs = append(errs, err)
		}
		seg.f.Close()
	}
	s.idx.Lock()
	db := s.idx.db
	s.idx.db = nil
	s.idx.Unlock()
	errs = append(errs, s.shutIndex(db, true))
	s.codec.close()
	return errors.Join(errs...)
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

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}
