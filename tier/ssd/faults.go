package ssd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// How the tier survives a failing device (docs/durability.md, "Faults"):
//
//   - Any failed read, write, flush or file creation, and any failed index
//     write, degrades the tier. A degraded tier refuses puts with
//     tier.ErrUnavailable, so the hierarchy keeps new blocks in DRAM, and
//     keeps serving reads: every read is verified against its CRC-32C, so
//     a bad sector is an error or a dropped block, never wrong bytes. The
//     log says why once per episode; Health and the metrics say it until
//     the tier recovers.
//   - A probe retries with exponential backoff: it writes, flushes, reads
//     back and removes a small file next to the segments, and reopens the
//     index if that was what failed. When it succeeds the tier takes puts
//     again, into a new segment.
//   - A read error that is not a verification failure keeps the block: the
//     sector may read fine once the device recovers, and the block was
//     acknowledged as durable. The probe reads it again; a block still
//     unreadable after maxReadProbes probes is dropped, as is a block whose
//     bytes do not verify.
//   - A failed fdatasync (fsyncgate): Linux reports a writeback error once
//     and may mark the failed pages clean, so a second fdatasync can succeed
//     without the data ever reaching the device. The tier therefore never
//     retries a flush to make a put durable: every put that waited on the
//     failed flush, or on any later flush of that segment, fails and is not
//     acknowledged, the segment is sealed for good, and new puts go to a new
//     file. Records acknowledged before the failure were covered by an
//     earlier flush that succeeded and stay.
//   - The pebble index is a hint: segments describe themselves. Pebble
//     treats a failed WAL write as fatal to its commit pipeline, so after
//     one the tier stops writing to it, keeps the index in memory, and the
//     probe reopens pebble and rewrites the whole index from memory, which
//     also persists the deletes made meanwhile.

// Operation names, for Health.IOErrors, Health.Cause and the metrics.
const (
	opRead    = "read"
	opWrite   = "write"
	opSync    = "sync"
	opCreate  = "create"
	opIndex   = "index"
	opNoSpace = "no_space" // a cause only: counted under its operation
)

var ioOps = []string{opRead, opWrite, opSync, opCreate, opIndex}

// ioError is a failed operation on the device. It wraps both
// tier.ErrUnavailable and the system's error (syscall.EIO, ENOSPC).
type ioError struct {
	op  string
	err error
	// key and e name the block a failed read was for, when there was one.
	key block.Key
	e   *entry
}

func (e *ioError) Error() string   { return fmt.Sprintf("ssd: %s failed: %v", e.op, e.err) }
func (e *ioError) Unwrap() []error { return []error{tier.ErrUnavailable, e.err} }

// health is the tier's fault state.
type health struct {
	mu       sync.Mutex
	degraded bool
	cause    string
	reason   string
	since    time.Time
	gen      uint64 // faults seen; a probe that overlaps one does not clear it
	probing  bool
	stopped  bool // the tier is closing: no new probe
	// The block whose failed read began a read episode: the probe reads
	// it again, and drops it after maxReadProbes failures.
	readKey    block.Key
	readEntry  *entry
	readProbes int

	ioErrors   [5]atomic.Int64 // by ioOps
	recoveries atomic.Int64
}

func (h *health) count(op string) {
	for i, o := range ioOps {
		if o == op {
			h.ioErrors[i].Add(1)
		}
	}
}

// refuse returns the error for a put while the tier is degraded.
func (s *SSD) refuse() error {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.degraded {
		return nil
	}
	return fmt.Errorf("%w: ssd tier degraded since %s (%s): %s", tier.ErrUnavailable, h.since.UTC().Format(time.RFC3339), h.cause, h.reason)
}

// fault records a failed operation. The first fault of an episode degrades
// the tier, logs why and starts the probe; later ones are only counted.
func (s *SSD) fault(e *ioError) {
	h := &s.health
	h.count(e.op)
	if e.op == opIndex {
		s.idxFailed.Store(true)
	}
	cause := e.op
	if errors.Is(e.err, syscall.ENOSPC) {
		cause = opNoSpace
	}
	h.mu.Lock()
	h.gen++
	if h.degraded {
		h.mu.Unlock()
		return
	}
	h.degraded, h.cause, h.reason, h.since = true, cause, e.err.Error(), s.opts.Now()
	h.readKey, h.readEntry, h.readProbes = e.key, e.e, 0
	if !h.probing && !h.stopped {
		// Added under h.mu, which Close takes to set stopped before it
		// waits: no probe starts once Close waits.
		h.probing = true
		s.probes.Add(1)
		go s.probeLoop()
	}
	h.mu.Unlock()
	s.opts.Logger.Error("ssd: tier degraded; refusing writes and serving verified reads until the device recovers",
		"tier", s.opts.Name, "cause", cause, "err", e)
}

// probeLoop retries the probe with exponential backoff until it succeeds
// with no fault in between, or the tier closes.
func (s *SSD) probeLoop() {
	defer s.probes.Done()
	delay := s.opts.ProbeInterval
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-s.probeStop:
			s.health.mu.Lock()
			s.health.probing = false
			s.health.mu.Unlock()
			return
		case <-t.C:
		}
		s.health.mu.Lock()
		gen := s.health.gen
		s.health.mu.Unlock()
		err := s.probe()
		h := &s.health
		h.mu.Lock()
		if err == nil && h.gen == gen {
			since := h.since
			h.degraded, h.cause, h.reason, h.since, h.probing = false, "", "", time.Time{}, false
			h.mu.Unlock()
			h.recoveries.Add(1)
			s.opts.Logger.Info("ssd: tier recovered; taking writes again", "tier", s.opts.Name, "degraded_for", s.opts.Now().Sub(since).Round(time.Millisecond))
			return
		}
		h.mu.Unlock()
		if err == nil {
			delay = s.opts.ProbeInterval // a new fault during the probe: try again soon
		} else {
			delay = min(2*delay, s.opts.MaxProbeInterval)
		}
		t.Reset(delay)
	}
}

// probeSize is the probe file's size: one page, enough to exercise a
// write, a flush and a read of the device.
const probeSize = 4096

// probeName is the probe file in the segment directory; it is not a
// segment name, so recovery ignores a leftover one.
const probeName = "probe.tmp"

// probe checks that the device writes, flushes and reads again, and
// reopens the index if it failed.
func (s *SSD) probe() error {
	fs := s.opts.Files
	// A full device fails again at the next segment; writes resume only
	// once it has room for one (a few records freed by a dropped segment
	// would only make the tier flap between full and recovered).
	if fr, ok := fs.(freeSpacer); ok {
		if free, err := fr.Free(s.segDir); err == nil && free < s.opts.SegmentSize {
			return fmt.Errorf("ssd: %d bytes free under the segments, want a segment's %d: %w", free, s.opts.SegmentSize, syscall.ENOSPC)
		}
	}
	path := filepath.Join(s.segDir, probeName)
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer fs.Remove(path)
	defer f.Close()
	want := bytes.Repeat([]byte{0xa5}, probeSize)
	if err := writeFull(f, [][]byte{want}, 0); err != nil {
		return err
	}
	if err := f.Datasync(); err != nil {
		return err
	}
	got := make([]byte, probeSize)
	if _, err := f.ReadAt(got, 0); err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return errors.New("ssd: probe read back other bytes")
	}
	if err := s.probeRead(); err != nil {
		return err
	}
	if s.idxFailed.Load() {
		return s.reopenIndex()
	}
	return nil
}

// maxReadProbes is how many probes may find a block unreadable before it
// is dropped: a sector that the device cannot read after minutes of
// retries (the backoff doubles up to MaxProbeInterval) is lost, and a
// cache is better off without the block than degraded for good.
const maxReadProbes = 8

// probeRead reads again the block whose failed read began the episode.
func (s *SSD) probeRead() error {
	h := &s.health
	h.mu.Lock()
	key, e := h.readKey, h.readEntry
	h.mu.Unlock()
	if e == nil {
		return nil
	}
	s.mu.Lock()
	seg := e.seg
	if s.mu.blocks[key] != e || seg == nil || s.mu.closed {
		s.mu.Unlock()
		return nil // gone or moved meanwhile: nothing left to read
	}
	seg.refs++
	s.mu.Unlock()
	_, _, err := s.readFullRecord(seg, e, key)
	s.mu.Lock()
	s.releaseSegLocked(seg)
	s.mu.Unlock()
	if err == nil {
		return nil
	}
	h.mu.Lock()
	h.readProbes++
	tries := h.readProbes
	h.mu.Unlock()
	if ioe := (*ioError)(nil); errors.As(err, &ioe) && tries < maxReadProbes {
		return err
	}
	s.mu.Lock()
	if s.mu.blocks[key] == e {
		s.dropEntryLocked(key, e)
		s.corrupt.Add(1)
	}
	s.mu.Unlock()
	s.emptyTrash()
	s.opts.Logger.Error("ssd: dropping a block its device cannot read", "key", key, "attempts", tries, "err", err)
	return nil
}

// reopenIndex replaces a failed pebble instance with a new one in a fresh
// directory and rewrites the index there from the in-memory map, in one
// synced batch: whatever the failed instance lost (its WAL tail, deletes
// made since) is put right. INDEX then names the new directory. A failed
// instance is closed when pebble allows it; a poisoned one is abandoned,
// holding a few MiB and its directory until the process exits.
func (s *SSD) reopenIndex() error {
	s.idx.Lock()
	defer s.idx.Unlock()
	fs := s.opts.IndexFS
	if old := s.idx.db; old != nil {
		if s.idxPoisoned.Load() {
			s.opts.Logger.Warn("ssd: abandoning the failed index instance until restart", "dir", indexDirOf(s.idx.gen))
		} else {
			closeIndex(old) // its error is the fault being recovered from
		}
		s.idx.db = nil
	}
	gen := s.idx.gen + 1
	path := filepath.Join(s.opts.Dir, indexDirOf(gen))
	if err := fs.RemoveAll(path); err != nil {
		return err
	}
	db, err := openPebble(path, s.opts.IndexCacheSize, fs, s.opts.Logger)
	if err != nil {
		return err
	}
	b := db.NewBatch()
	s.mu.Lock()
	for k, e := range s.mu.blocks {
		if e.seg != nil {
			b.Set(blockIndexKey(k), e.location().encode(), nil)
		}
	}
	for id, seg := range s.mu.segs {
		var m [8]byte
		putUint64(m[:], uint64(seg.indexed))
		b.Set(markerKey(id), m[:], nil)
	}
	s.mu.Unlock()
	err = commitBatch(b, pebble.Sync)
	if err == nil {
		err = writeIndexPointer(fs, s.opts.Dir, gen)
	}
	if err != nil {
		if pe := (*poisonedError)(nil); !errors.As(err, &pe) {
			closeIndex(db)
		}
		return err
	}
	oldGen, wasPoisoned := s.idx.gen, s.idxPoisoned.Load()
	s.idx.db, s.idx.gen = db, gen
	s.idxFailed.Store(false)
	s.idxPoisoned.Store(false)
	if !wasPoisoned {
		// Closed, so unlocked: its directory can go now. A poisoned
		// one's goes at the next open.
		if err := fs.RemoveAll(filepath.Join(s.opts.Dir, indexDirOf(oldGen))); err != nil {
			s.opts.Logger.Warn("ssd: removing the old index directory", "err", err)
		}
	}
	return nil
}

// Health implements tier.HealthReporter.
func (s *SSD) Health() tier.Health {
	h := &s.health
	h.mu.Lock()
	out := tier.Health{Degraded: h.degraded, Cause: h.cause, Reason: h.reason, Since: h.since}
	h.mu.Unlock()
	out.IOErrors = make(map[string]int64, len(ioOps))
	for i, op := range ioOps {
		out.IOErrors[op] = h.ioErrors[i].Load()
	}
	out.Recoveries = h.recoveries.Load()
	return out
}

var _ tier.HealthReporter = (*SSD)(nil)
