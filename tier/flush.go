package tier

import (
	"context"

	"github.com/yuebing/yuebing/block"
)

// Flush copies blocks held only in upper tiers down to the next tier while
// that tier has free room, without evicting anything there. A server calls
// it on shutdown so DRAM-only blocks survive a restart. It returns how many
// blocks it copied.
func (h *Hierarchy) Flush(ctx context.Context) (int, error) {
	n := 0
	for level := 0; level+1 < len(h.tiers); level++ {
		var keys []block.Key
		h.tiers[level].Range(func(k block.Key, _ BlockInfo) bool {
			keys = append(keys, k)
			return true
		})
		for _, k := range keys {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			if h.flushOne(ctx, level, k) {
				n++
			}
		}
	}
	return n, nil
}

// flushOne copies one block from tier level to the next and reports
// whether it did. The copy is written without the key's stripe lock; under
// the lock it is then indexed only if the copy it was made from is still
// the block's, and removed otherwise, so a delete is never undone.
func (h *Hierarchy) flushOne(ctx context.Context, level int, k block.Key) bool {
	upper, lower := h.tiers[level], h.tiers[level+1]
	if e, ok := h.ix.Get(k); !ok || e.Tiers.Has(level+1) {
		return false
	}
	hd, err := upper.Get(ctx, k)
	if err != nil {
		return false
	}
	defer hd.Release()
	info, err := upper.Stat(k)
	if err != nil {
		return false
	}
	// Room for the block plus a record header and a segment's slack: Flush
	// never evicts what the lower tier holds.
	if st := lower.Stats(); st.Capacity-st.Used < int64(hd.Len())+4096 {
		return false
	}
	opts := PutOptions{Meta: info.Meta, Retention: info.Retention, RetainUntil: info.RetainUntil}
	opts.Checksum, opts.HasChecksum = hd.KnownChecksum()
	if err := lower.Put(ctx, k, hd.Bytes(), opts); err != nil {
		return false
	}
	mu := h.lock(k)
	mu.Lock()
	defer mu.Unlock()
	if e, ok := h.ix.Get(k); !ok || !current(e, level, info.Version) {
		// Deleted while the copy was written, or replaced by other bytes
		// under the key: the copy is not the block.
		_ = lower.Delete(k)
		return false
	}
	if info, err := lower.Stat(k); err == nil {
		h.setTier(k, level+1, info)
	}
	return true
}
