package dram

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/policy"
)

// writer fills a reserved span of the arena in place and checksums each piece
// while it is still in cache.
type writer struct {
	d    *DRAM
	key  block.Key
	opts tier.PutOptions
	span int32
	off  int64
	buf  []byte // the reserved arena bytes
	n    int
	// summing is set when the checksum is taken while writing: the tier
	// is eager, or the put carries a checksum to verify.
	summing bool
	sum     uint32
	done    bool
}

var _ tier.Writer = (*writer)(nil)

func (w *writer) Write(p []byte) (int, error) {
	if w.done {
		return 0, errors.New("dram: write to a finished writer")
	}
	if len(p) > len(w.buf)-w.n {
		return 0, fmt.Errorf("%w: writing %d bytes past the reserved %d", tier.ErrSize, w.n+len(p)-len(w.buf), len(w.buf))
	}
	copy(w.buf[w.n:], p)
	if w.summing {
		w.sum = block.UpdateChecksum(w.sum, p)
	}
	w.n += len(p)
	return len(p), nil
}

// ReadFrom reads r straight into the arena until EOF. Input beyond the
// reserved size is an ErrSize error.
func (w *writer) ReadFrom(r io.Reader) (int64, error) {
	if w.done {
		return 0, errors.New("dram: write to a finished writer")
	}
	start := w.n
	for w.n < len(w.buf) {
		m, err := r.Read(w.buf[w.n:])
		if w.summing {
			w.sum = block.UpdateChecksum(w.sum, w.buf[w.n:w.n+m])
		}
		w.n += m
		if err == io.EOF {
			return int64(w.n - start), nil
		}
		if err != nil {
			return int64(w.n - start), err
		}
	}
	var probe [1]byte
	for {
		m, err := r.Read(probe[:])
		if m > 0 {
			return int64(w.n - start), fmt.Errorf("%w: input is longer than the reserved %d bytes", tier.ErrSize, len(w.buf))
		}
		if err == io.EOF {
			return int64(w.n - start), nil
		}
		if err != nil {
			return int64(w.n - start), err
		}
	}
}

func (w *writer) Commit(context.Context) error {
	if w.done {
		return errors.New("dram: commit of a finished writer")
	}
	if w.n != len(w.buf) {
		w.Abort()
		return fmt.Errorf("%w: wrote %d of %d bytes", tier.ErrSize, w.n, len(w.buf))
	}
	if w.opts.HasChecksum && w.sum != w.opts.Checksum {
		w.Abort()
		return fmt.Errorf("%w: got crc32c %08x, want %08x", tier.ErrChecksum, w.sum, w.opts.Checksum)
	}
	d := w.d
	d.mu.Lock()
	defer d.mu.Unlock()
	w.done = true
	d.mu.handles--
	// An old copy still being evicted is replaced: its hand-off finishes
	// with it, and frees it, without touching the new one.
	if old, ok := d.mu.blocks[w.key]; ok && old.state == stateLive || d.mu.closed {
		d.freeLocked(w.span)
		d.maybeUnmapLocked()
		if d.mu.closed {
			return tier.ErrClosed
		}
		return tier.ErrExists
	}
	d.mu.version++
	b := &blk{t: d, key: w.key, span: w.span, off: w.off, size: int64(len(w.buf)), metaLen: int64(len(w.opts.Meta)), version: d.mu.version}
	if w.summing {
		b.sum.Store(uint64(w.sum) | sumKnown)
	}
	d.mu.blocks[w.key] = b
	d.puts.Add(1)
	now := d.opts.Now().UnixNano()
	// create refused an invalid class, so Settle only lapses an ended one.
	b.retention, b.retainUntil = tier.Settle(w.opts.Retention, tier.UnixNanos(w.opts.RetainUntil), now)
	if b.retainUntil != 0 {
		d.mu.retains.Push(b.retainUntil, b)
	}
	if u := w.opts.PinnedUntil.UnixNano(); !w.opts.PinnedUntil.IsZero() && u > now &&
		d.mu.pinned+b.size <= int64(d.opts.MaxPinnedFraction*float64(d.opts.Capacity)) {
		b.pinnedUntil = u
		d.mu.pinned += b.size
		d.mu.pins.Push(u, b)
		return nil
	}
	d.placeLocked(b, policy.Info[block.Key]{Size: b.size, Parent: w.opts.Parent, HasParent: w.opts.HasParent})
	return nil
}

func (w *writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	d := w.d
	d.mu.Lock()
	d.mu.handles--
	d.freeLocked(w.span)
	d.maybeUnmapLocked()
	d.mu.Unlock()
}
