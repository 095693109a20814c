package tier

import (
	"context"
	"errors"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// errStaleCopy is a demotion's outcome when the lower tier holds other
// bytes under the key (see holdsCopy).
var errStaleCopy = errors.New("tier: the lower tier holds a deleted copy under the key")

// demotion is a block on its way from tier level to level+1.
type demotion struct {
	key       block.Key
	info      BlockInfo
	h         *Handle
	level     int
	weight    int64
	cancelled bool // guarded by inflight's mutex
	// retention is the class the lower copy must have; SetRetention
	// changes it while the block is in flight. Guarded by inflight's mutex.
	retention   Retention
	retainUntil time.Time
}

func (h *Hierarchy) inflightHandle(key block.Key, level int) *Handle {
	h.inflight.Lock()
	defer h.inflight.Unlock()
	if d := h.inflight.m[key]; d != nil && d.level == level && !d.cancelled {
		return d.h.Clone()
	}
	return nil
}

func (h *Hierarchy) inflightHandleExists(key block.Key) bool {
	h.inflight.Lock()
	defer h.inflight.Unlock()
	_, ok := h.inflight.m[key]
	return ok
}

// evicted is every tier's EvictHandler. A block leaving a tier that has
// another below it is queued for demotion unless the lower tier already has
// a copy; otherwise it is forgotten at that level.
func (h *Hierarchy) evicted(ctx context.Context, level int, key block.Key, info BlockInfo, hd *Handle) {
	next := level + 1
	version := anyVersion
	if hd != nil {
		version = info.Version
		// A copy replaced by a newer one (or deleted) while it was being
		// evicted is no longer the block: let it go without a trace.
		if e, ok := h.ix.Get(key); !ok || !current(e, level, version) {
			hd.Release()
			return
		}
	}
	if hd == nil || next >= len(h.tiers) || h.closed.Load() {
		if hd != nil {
			hd.Release()
		}
		h.clearCopy(key, level, version)
		return
	}
	if e, ok := h.ix.Get(key); ok && e.Tiers.Has(next) {
		hd.Release() // a clean copy: the lower tier has it already
		h.clearCopy(key, level, version)
		return
	}
	if !h.admitDemotion(key, level) {
		hd.Release()
		h.clearCopy(key, level, version)
		return
	}
	d := &demotion{key: key, info: info, h: hd, level: level, weight: min(info.Size+1, h.opts.DemoteQueueBytes),
		retention: info.Retention, retainUntil: info.RetainUntil}
	// Each boundary between two tiers has its own queue, bytes and
	// workers: a worker writing into tier n+1 makes it evict into the
	// queue of boundary n+1, which other workers drain, so waiting for
	// room there never waits on itself (one shared queue deadlocked DRAM,
	// SSD and S3 under load).
	sem, q := h.demoteSem[level], h.demoteQ[level]
	if !sem.TryAcquire(d.weight) {
		if h.opts.DemoteWhenFull == DemoteDrop {
			h.dropDemotion(d)
			return
		}
		if err := sem.Acquire(ctx, d.weight); err != nil {
			h.dropDemotion(d)
			return
		}
	}
	h.inflight.Lock()
	if e, ok := h.ix.Get(key); !ok || !current(e, level, version) {
		h.inflight.Unlock() // deleted or replaced while being evicted
		sem.Release(d.weight)
		hd.Release()
		return
	}
	h.inflight.m[key] = d
	h.inflight.Unlock()
	select {
	case q <- d:
	case <-h.ctx.Done():
		h.finishDemotion(d)
		sem.Release(d.weight)
		h.clearCopy(key, level, version)
	}
}

func (h *Hierarchy) dropDemotion(d *demotion) {
	h.dropped.Add(1)
	d.h.Release()
	h.clearCopy(d.key, d.level, d.info.Version)
}

func (h *Hierarchy) finishDemotion(d *demotion) {
	h.inflight.Lock()
	if h.inflight.m[d.key] == d {
		delete(h.inflight.m, d.key)
	}
	h.inflight.Unlock()
	d.h.Release()
}

// demoteLoop writes the demotions queued at one tier boundary (from tier
// level into level+1).
func (h *Hierarchy) demoteLoop(level int) {
	q, sem := h.demoteQ[level], h.demoteSem[level]
	for {
		select {
		case d := <-q:
			h.demote(d)
		case <-h.ctx.Done():
			// Drain what is queued so pins and space are released.
			for {
				select {
				case d := <-q:
					h.finishDemotion(d)
					sem.Release(d.weight)
					h.clearCopy(d.key, d.level, d.info.Version)
				default:
					return
				}
			}
		}
	}
}

// demote writes one block to the next tier and moves its index bit there.
// The block stays readable from the upper tier's memory until then.
func (h *Hierarchy) demote(d *demotion) {
	defer h.demoteSem[d.level].Release(d.weight)
	next := d.level + 1
	lower := h.tiers[next]
	e, _ := h.ix.Get(d.key)
	// A known checksum is verified on the way down; otherwise the lower
	// tier takes the first one, as it writes.
	opts := PutOptions{Meta: d.info.Meta}
	opts.Checksum, opts.HasChecksum = d.h.KnownChecksum()
	h.inflight.Lock()
	opts.Retention, opts.RetainUntil = d.retention, d.retainUntil
	h.inflight.Unlock()
	if e.PinnedUntil != 0 {
		opts.PinnedUntil = time.Unix(int64(e.PinnedUntil), 0)
	}
	err := lower.Put(h.ctx, d.key, d.h.Bytes(), opts)
	if errors.Is(err, ErrExists) && !isShared(lower) && !holdsCopy(lower, d.key, int64(d.h.Len()), d.h.Checksum) {
		// A deleted block's copy, its demotion cancelled but not yet
		// undone: this block is dropped (a miss) rather than indexed
		// onto the other bytes.
		err = errStaleCopy
	}
	wrote := err == nil || errors.Is(err, ErrExists)

	h.inflight.Lock()
	cancelled := d.cancelled
	var pinnedUntil uint32
	retention, retainUntil := d.retention, d.retainUntil
	if !cancelled && wrote {
		h.ix.Update(d.key, func(e index.Entry, ok bool) (index.Entry, bool) {
			if !ok || !current(e, d.level, d.info.Version) {
				cancelled = true // deleted or replaced: the copy must go
				return e, ok
			}
			e.Tiers = e.Tiers.Without(d.level).With(next)
			pinnedUntil = e.PinnedUntil
			return e, true
		})
	}
	if h.inflight.m[d.key] == d {
		delete(h.inflight.m, d.key)
	}
	h.inflight.Unlock()
	d.h.Release()

	switch {
	case cancelled && err == nil:
		// Deleted while in flight: undo the copy, unless a put of the
		// key since has replaced it with its own and indexed that.
		if e, ok := h.ix.Get(d.key); !ok || !e.Tiers.Has(next) {
			lower.Delete(d.key)
		}
	case !wrote:
		h.clearCopy(d.key, d.level, d.info.Version)
		// A degraded tier says why once, in its own log and Health; a
		// line per dropped block would flood the log.
		if !errors.Is(err, ErrNoSpace) && !errors.Is(err, ErrTooLarge) && err != errStaleCopy && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrUnavailable) {
			h.opts.Logger.Warn("tier: demotion failed; block dropped", "key", d.key, "to", lower.Name(), "err", err)
		}
	default:
		h.counters[d.level].demotions.Add(1)
		if !cancelled {
			h.changed(d.key, d.level, false)
			h.changed(d.key, next, true)
		}
		if pinnedUntil != 0 && pinnedUntil != unixSeconds(opts.PinnedUntil) {
			lower.Pin(d.key, time.Unix(int64(pinnedUntil), 0)) // pinned while in flight
		}
		if retention != opts.Retention || !retainUntil.Equal(opts.RetainUntil) {
			setRetention(lower, d.key, retention, retainUntil) // changed while in flight
		}
	}
}
