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
//     acknowledged as durable. A block whose bytes do not verify is dropped.
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
	start := !h.probing && !h.stopped
	h.probing = h.probing || start
	h.mu.Unlock()
	s.opts.Logger.Error("ssd: tier degraded; refusing writes and serving verified reads until the device recovers",
		"tier", s.opts.Name, "cause", cause, "err", e)
	if start {
		s.probes.Add(1)
		go s.probeLoop()
	}
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
	if s.idxFailed.Load() {
		return s.reopenIndex()
	}
	return nil
}

// reopenIndex replaces a failed pebble instance with a new one over the
// same directory and rewrites the index from the in-memory map, in one
// synced batch: whatever the failed instance lost (its unsynced WAL tail,
// deletes made since) is put right.
func (s *SSD) reopenIndex() error {
	s.idx.Lock()
	defer s.idx.Unlock()
	if s.idx.db != nil {
		closeIndex(s.idx.db) // its error is the fault being recovered from
		s.idx.db = nil
	}
	db, err := openPebble(filepath.Join(s.opts.Dir, "index"), s.opts.IndexCacheSize, s.opts.IndexFS, s.opts.Logger)
	if err != nil {
		return err
	}
	b := db.NewBatch()
	b.DeleteRange([]byte{prefixBlock}, []byte{prefixBlock + 1}, nil)
	b.DeleteRange([]byte{prefixMarker}, []byte{prefixMarker + 1}, nil)
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
	if err := commitBatch(b, pebble.Sync); err != nil {
		closeIndex(db)
		return err
	}
	s.idx.db = db
	s.idxFailed.Store(false)
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
