package ssd

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

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
		retains  expiry.Heap[block.Key] // retention classes with an end (entry.retainUntil)
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
	_ tier.Retainer      = (*SSD)(nil)
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
	retention   tier.Retention
	retainUntil int64 // Unix nanoseconds when retention lapses to Normal; 0: never
}

func (e *entry) location() location {
	l := location{off: e.off, recLen: e.recLen, hdr: e.hdr, pinnedUntil: e.pinnedUntil, meta: e.meta,
		retention: e.retention, retainUntil: e.retainUntil}
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

// dropAlign is the granule dropPages widens its range to. The kernel drops
// only pages (and large folios) that lie wholly inside the range, so the
// exact range of a record, which rarely starts or ends on a page boundary,
// leaves the pages it shares with its neighbours cached; on kernels with
// large page-cache folios that is most of the segment.
const dropAlign = 2 << 20

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

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}
