package tier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/semaphore"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// Hierarchy is the block store: tiers from fastest to slowest, an index of
// where every block is, and the demotion and promotion between them. It is
// safe for concurrent use.
//
// A block may have copies in several tiers: a block promoted from SSD keeps
// its SSD copy, so evicting it from DRAM again costs no write. Index updates
// of one key (a put's or a writer's indexing, delete, pin, promote) are
// serialized by a striped lock; tier writes and syncs run outside it, so a
// slow disk holds up only its own key. Demotions never take it, so a put
// that waits for room in the demotion queue cannot deadlock with the
// workers draining it.
type Hierarchy struct {
	tiers []Tier
	opts  HierarchyOptions
	ix    *index.Index
	// locks are the stripes, chosen by a key's first byte. Keys are SHA-256
	// digests, so that byte is uniform: two unrelated keys share a stripe
	// with probability 1/256. The lock is held only for in-memory index
	// updates (microseconds), so at the concurrency a node sees (thousands
	// of requests in flight at most) collisions cost next to nothing, and
	// 256 mutexes are 2 KiB; more stripes would buy no measurable
	// throughput.
	locks [256]sync.Mutex

	demoteSem  []*semaphore.Weighted // per tier boundary: level into level+1
	demoteQ    []chan *demotion
	promoteSem *semaphore.Weighted
	promoteQ   chan promotion
	recent     *lru.Cache[block.Key, struct{}]

	inflight struct {
		sync.Mutex
		m map[block.Key]*demotion
	}
	// putting holds the keys with a put in progress (startPut), striped
	// like locks; each stripe's mutex is held for a map operation only.
	putting [256]struct {
		sync.Mutex
		m map[block.Key]chan struct{}
	}

	counters []tierCounters
	hooks    hooks
	dropped  atomic.Int64 // demotions dropped because the queue was full
	hits     atomic.Int64
	misses   atomic.Int64

	ctx    context.Context // ends when Close starts
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool

	// admission is the SSD write admission policy; nil writes every
	// evicted block (policy.AdmitAll). See admission.go.
	admission *admission
}

type tierCounters struct {
	demotions, promotions atomic.Int64
	// skipped counts reads the tier could not serve that never reached
	// it: the index said it held no copy. They are the tier's misses
	// beside those its own Get counts.
	skipped atomic.Int64
}

// NewHierarchy composes tiers, fastest first, and rebuilds the index from
// what they hold (blocks an SSD tier kept across a restart). It takes
// ownership of the tiers: Close closes them.
func NewHierarchy(tiers []Tier, opts HierarchyOptions) (*Hierarchy, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if len(tiers) == 0 || len(tiers) > index.MaxTiers {
		return nil, fmt.Errorf("tier: a hierarchy needs 1 to %d tiers, got %d", index.MaxTiers, len(tiers))
	}
	recent, _ := lru.New[block.Key, struct{}](opts.RecentHits)
	h := &Hierarchy{
		tiers: tiers,
		opts:  opts,
		ix:    index.New(index.Options{}),
		// The queues' bytes are bounded by the semaphores (DemoteQueueBytes,
		// PromoteQueueBytes); the channel lengths bound only the count.
		// KV blocks are megabytes (256 tokens of LLaMA3-8B are 32 MiB, of
		// LLaMA3-70B 80 MiB), so for them the bytes bind long before the
		// count. The count matters only for small values (Redis keys,
		// tests): 1024 queued demotions are 1024 pointers, enough to keep
		// the workers busy through a burst of evictions of small blocks,
		// after which an eviction waits for a worker; 256 promotions, and
		// a promotion that finds the queue full is skipped, never waited
		// for.
		promoteSem: semaphore.NewWeighted(opts.PromoteQueueBytes),
		promoteQ:   make(chan promotion, 256),
		recent:     recent,
		counters:   make([]tierCounters, len(tiers)),
	}
	for range max(len(tiers)-1, 0) {
		h.demoteSem = append(h.demoteSem, semaphore.NewWeighted(opts.DemoteQueueBytes))
		h.demoteQ = append(h.demoteQ, make(chan *demotion, 1024))
	}
	h.inflight.m = make(map[block.Key]*demotion)
	for i := range h.putting {
		h.putting[i].m = make(map[block.Key]chan struct{})
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if err := h.startAdmission(); err != nil {
		return nil, err
	}
	for level, t := range tiers {
		t.Range(func(k block.Key, info BlockInfo) bool {
			h.ix.Update(k, func(e index.Entry, _ bool) (index.Entry, bool) {
				e.Tiers = e.Tiers.With(level)
				setInfo(&e, level, info)
				return e, true
			})
			return true
		})
		if n, ok := t.(EvictNotifier); ok {
			n.SetEvictHandler(func(ctx context.Context, k block.Key, info BlockInfo, hd *Handle) {
				h.evicted(ctx, level, k, info, hd)
			})
		}
	}
	for level := range h.demoteQ {
		for range opts.DemoteWorkers {
			h.wg.Go(func() { h.demoteLoop(level) })
		}
	}
	h.wg.Go(h.promoteLoop)
	return h, nil
}

func unixSeconds(t time.Time) uint32 {
	if t.IsZero() {
		return 0
	}
	return uint32(max(t.Unix(), 0))
}

func (h *Hierarchy) lock(k block.Key) *sync.Mutex { return &h.locks[k[0]] }

// Tiers returns the tiers, fastest first.
func (h *Hierarchy) Tiers() []Tier { return h.tiers }

// indexCopy records tier level's copy of key in the index, under the key's
// stripe lock, if the tier still holds it: a Delete that ran while the copy
// was being written removed it from the tier, and the index must not bring
// it back. Stat is a lookup in the tier's memory, no disk I/O.
func (h *Hierarchy) indexCopy(key block.Key, level int) {
	mu := h.lock(key)
	mu.Lock()
	defer mu.Unlock()
	info, err := h.tiers[level].Stat(key)
	if err != nil {
		return
	}
	h.setTier(key, level, info)
}

func (h *Hierarchy) setTier(key block.Key, level int, info BlockInfo) {
	now := uint32(h.opts.Now().Unix())
	h.ix.Update(key, func(e index.Entry, _ bool) (index.Entry, bool) {
		e.Tiers = e.Tiers.With(level)
		setInfo(&e, level, info)
		e.Access = now
		return e, true
	})
	h.changed(key, level, true)
}

// holdsCopy reports whether t's copy of key has the given size and
// checksum. Keys are content hashes, so a copy found under a key is
// normally the block; but a block deleted while its demotion was in
// flight leaves its copy in the lower tier until the demotion's worker
// removes it, and a block put again under the key with other bytes must
// not take that copy for its own. A tier that does not know its copy's
// checksum (DRAM before a read) holds no such leftovers.
func holdsCopy(t Tier, key block.Key, size int64, sum func() uint32) bool {
	info, err := t.Stat(key)
	if err != nil || info.Size != size {
		return false
	}
	return !info.HasChecksum || info.Checksum == sum()
}

// FlagChecksum in an index entry's Flags says its Checksum is known.
const FlagChecksum = 1

// setInfo records a tier's view of the block. For the top tier, Loc keeps
// the copy's version (see BlockInfo.Version), so the eviction of an old copy
// is told from the current one.
func setInfo(e *index.Entry, level int, info BlockInfo) {
	if level == 0 {
		e.Loc = info.Version
	}
	e.Size = uint32(info.Size)
	if info.HasChecksum {
		e.Checksum = info.Checksum
		e.Flags |= FlagChecksum
	}
	e.PinnedUntil = max(e.PinnedUntil, unixSeconds(info.PinnedUntil))
}

// anyVersion matches every copy in clearCopy: for callers that forget a
// level whatever copy it holds (lower tiers report only current copies).
const anyVersion = ^uint64(0)

// current reports whether e's copy at level is the one of the given version.
func current(e index.Entry, level int, version uint64) bool {
	return e.Tiers.Has(level) && (level != 0 || version == anyVersion || e.Loc == version)
}

// clearCopy forgets the block's copy at level if it is the copy of the given
// version; a newer copy put meanwhile stays indexed.
func (h *Hierarchy) clearCopy(key block.Key, level int, version uint64) {
	gone, had := false, false
	h.ix.Update(key, func(e index.Entry, ok bool) (index.Entry, bool) {
		if !ok || !current(e, level, version) {
			return e, ok
		}
		had = true
		e.Tiers = e.Tiers.Without(level)
		gone = ok && e.Tiers == 0
		return e, ok && e.Tiers != 0
	})
	if had {
		h.changed(key, level, false)
	}
	if gone && !h.closed.Load() {
		if fns := h.hooks.drop.Load(); fns != nil {
			for _, fn := range *fns {
				fn(key)
			}
		}
	}
}

// Lookup returns what the index knows of a block, without touching a tier.
func (h *Hierarchy) Lookup(key block.Key) (index.Entry, bool) {
	e, ok := h.ix.Get(key)
	return e, ok && e.Tiers != 0
}

// Stat returns a block's metadata (size, checksum if known, pin, Meta) from
// the fastest tier holding it, and that tier's position.
func (h *Hierarchy) Stat(key block.Key) (BlockInfo, int, error) {
	e, ok := h.ix.Get(key)
	if !ok {
		return BlockInfo{}, -1, ErrNotFound
	}
	for level, t := range h.tiers {
		if !e.Tiers.Has(level) {
			continue
		}
		if info, err := t.Stat(key); err == nil {
			return info, level, nil
		}
	}
	h.inflight.Lock()
	d := h.inflight.m[key]
	h.inflight.Unlock()
	if d != nil {
		return d.info, d.level, nil
	}
	return BlockInfo{}, -1, ErrNotFound
}

// Contains reports whether the block is stored.
func (h *Hierarchy) Contains(key block.Key) bool {
	_, ok := h.Lookup(key)
	return ok
}

// PrefixMatch returns how many leading blocks of chain are stored and, per
// tier, how many of those have their fastest copy there.
func (h *Hierarchy) PrefixMatch(chain []block.Key) index.Match { return h.ix.PrefixMatch(chain) }

// Len returns the number of stored blocks.
func (h *Hierarchy) Len() int { return h.ix.Len() }

// Scan iterates the stored blocks; see index.Index.Scan.
func (h *Hierarchy) Scan(cursor uint64, count int, fn func(block.Key, index.Entry) bool) uint64 {
	return h.ix.Scan(cursor, count, fn)
}

// HierarchyStats are the store's counters.
type HierarchyStats struct {
	Tiers []Stats `json:"tiers"`
	// Blocks is the number of distinct blocks stored.
	Blocks int64 `json:"blocks"`
	// Hits and Misses count reads of the whole hierarchy: Gets, and the
	// reads front ends report with Missed. A tier's Misses are the reads
	// that reached it or passed it by without being served there: a read
	// served from the second tier is a miss of the first.
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
	// DroppedDemotions counts evicted blocks dropped because the demotion
	// queue was full (DemoteDrop) or the put waiting for it gave up.
	DroppedDemotions int64 `json:"dropped_demotions"`
	// IndexBytes is the memory of the block index.
	IndexBytes int64 `json:"index_bytes"`
}

// Stats returns the counters of every tier and of the hierarchy.
func (h *Hierarchy) Stats() HierarchyStats {
	st := HierarchyStats{
		Blocks: int64(h.ix.Len()), Hits: h.hits.Load(), Misses: h.misses.Load(),
		DroppedDemotions: h.dropped.Load(), IndexBytes: h.ix.MemoryBytes(),
	}
	for level, t := range h.tiers {
		ts := t.Stats()
		ts.Demotions = h.counters[level].demotions.Load()
		ts.Promotions = h.counters[level].promotions.Load()
		ts.Misses += h.counters[level].skipped.Load()
		st.Tiers = append(st.Tiers, ts)
	}
	return st
}

// Close stops demotion and promotion and closes every tier. Demotions still
// queued are abandoned (their blocks were evictable anyway); call Flush
// first to keep upper-tier blocks.
func (h *Hierarchy) Close() error {
	if h.closed.Swap(true) {
		return nil
	}
	h.cancel()
	h.wg.Wait()
	var errs []error
	for _, t := range h.tiers {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}
