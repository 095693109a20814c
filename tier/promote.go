package tier

import (
	"time"

	"github.com/yuebing/yuebing/block"
)

type promotion struct {
	key    block.Key
	h      *Handle // a clone of the reader's handle, released after copying
	weight int64
}

// maybePromote queues a copy of a lower-tier hit for the top tier, if the
// admission policy wants it and the queue has room; otherwise it skips.
func (h *Hierarchy) maybePromote(key block.Key, hd *Handle) {
	switch h.opts.Promote {
	case PromoteNever:
		return
	case PromoteSecondHit:
		if ok, _ := h.recent.ContainsOrAdd(key, struct{}{}); !ok {
			return
		}
	}
	w := int64(hd.Len()) + 1
	if w > h.opts.PromoteQueueBytes || !h.promoteSem.TryAcquire(w) {
		return
	}
	p := promotion{key: key, h: hd.Clone(), weight: w}
	select {
	case h.promoteQ <- p:
	default:
		p.h.Release()
		h.promoteSem.Release(w)
	}
}

func (h *Hierarchy) promoteLoop() {
	for {
		select {
		case p := <-h.promoteQ:
			h.promote(p)
			p.h.Release()
			h.promoteSem.Release(p.weight)
		case <-h.ctx.Done():
			for {
				select {
				case p := <-h.promoteQ:
					p.h.Release()
				default:
					return
				}
			}
		}
	}
}

func (h *Hierarchy) promote(p promotion) {
	mu := h.lock(p.key)
	mu.Lock()
	defer mu.Unlock()
	e, ok := h.ix.Get(p.key)
	if !ok || e.Tiers == 0 || e.Tiers.Has(0) {
		return // deleted, or already on top
	}
	top := h.tiers[e.Tiers.Top()]
	info, err := top.Stat(p.key)
	if err != nil {
		return
	}
	// The bytes were read before the stripe lock was taken: a block
	// deleted and put again with other bytes since must not get the old
	// ones back on top.
	if !holdsCopy(top, p.key, int64(p.h.Len()), p.h.Checksum) {
		return
	}
	opts := PutOptions{Checksum: p.h.Checksum(), HasChecksum: true, Meta: info.Meta,
		Retention: info.Retention, RetainUntil: info.RetainUntil}
	if e.PinnedUntil != 0 {
		opts.PinnedUntil = time.Unix(int64(e.PinnedUntil), 0)
	}
	if err := h.tiers[0].Put(h.ctx, p.key, p.h.Bytes(), opts); err != nil {
		return // no room without waiting, or closing: a promotion is optional
	}
	if info, err := h.tiers[0].Stat(p.key); err == nil {
		h.setTier(p.key, 0, info)
		h.counters[0].promotions.Add(1)
	}
}
