package tier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/semaphore"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// Promotion admission policies: when a hit in a lower tier copies the block
// up into the top tier.
const (
	PromoteAlways    = "always"     // every lower-tier hit
	PromoteSecondHit = "second-hit" // a block hit again while it is among recent lower-tier hits
	PromoteNever     = "never"
)

// Behaviours when the demotion queue is full.
const (
	DemoteWait = "wait" // the put that evicted waits for room in the queue (back-pressure)
	DemoteDrop = "drop" // the evicted block is dropped instead of demoted
)

// HierarchyOptions configures a Hierarchy.
type HierarchyOptions struct {
	// DemoteQueueBytes bounds the bytes of evicted blocks waiting to be
	// written to the next tier. They stay readable, and their memory stays
	// allocated in the upper tier, until written. Default 256 MiB.
	DemoteQueueBytes int64
	// DemoteWorkers write queued demotions. Default 2.
	DemoteWorkers int
	// DemoteWhenFull is DemoteWait (default) or DemoteDrop.
	DemoteWhenFull string
	// Promote is PromoteAlways, PromoteSecondHit (default) or PromoteNever.
	// Second-hit keeps one-off reads of cold blocks (a scan, a replay) from
	// flushing the top tier.
	Promote string
	// PromoteQueueBytes bounds blocks read from a lower tier waiting to be
	// copied up; promotions beyond it are skipped. Default 64 MiB.
	PromoteQueueBytes int64
	// RecentHits is how many lower-tier hits second-hit admission remembers.
	// Default 65536.
	RecentHits int
	// Now is the clock for pins. Default time.Now.
	Now func() time.Time
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills in zero fields.
func (o *HierarchyOptions) EnsureDefaults() {
	if o.DemoteQueueBytes == 0 {
		o.DemoteQueueBytes = 256 << 20
	}
	if o.DemoteWorkers == 0 {
		o.DemoteWorkers = 2
	}
	if o.DemoteWhenFull == "" {
		o.DemoteWhenFull = DemoteWait
	}
	if o.Promote == "" {
		o.Promote = PromoteSecondHit
	}
	if o.PromoteQueueBytes == 0 {
		o.PromoteQueueBytes = 64 << 20
	}
	if o.RecentHits == 0 {
		o.RecentHits = 65536
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every invalid field.
func (o *HierarchyOptions) Validate() error {
	var errs []error
	if o.DemoteQueueBytes <= 0 {
		errs = append(errs, fmt.Errorf("tier: DemoteQueueBytes %d must be positive", o.DemoteQueueBytes))
	}
	if o.DemoteWorkers <= 0 || o.DemoteWorkers > 64 {
		errs = append(errs, fmt.Errorf("tier: DemoteWorkers %d must be in [1, 64]", o.DemoteWorkers))
	}
	if o.DemoteWhenFull != DemoteWait && o.DemoteWhenFull != DemoteDrop {
		errs = append(errs, fmt.Errorf("tier: DemoteWhenFull %q: want %q or %q", o.DemoteWhenFull, DemoteWait, DemoteDrop))
	}
	switch o.Promote {
	case PromoteAlways, PromoteSecondHit, PromoteNever:
	default:
		errs = append(errs, fmt.Errorf("tier: Promote %q: want %q, %q or %q", o.Promote, PromoteAlways, PromoteSecondHit, PromoteNever))
	}
	if o.PromoteQueueBytes <= 0 {
		errs = append(errs, fmt.Errorf("tier: PromoteQueueBytes %d must be positive", o.PromoteQueueBytes))
	}
	if o.RecentHits <= 0 {
		errs = append(errs, fmt.Errorf("tier: RecentHits %d must be positive", o.RecentHits))
	}
	return errors.Join(errs...)
}

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

	demoteSem  *semaphore.Weighted
	demoteQ    chan *demotion
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
}

type tierCounters struct {
	demotions, promotions atomic.Int64
	// skipped counts reads the tier could not serve that never reached
	// it: the index said it held no copy. They are the tier's misses
	// beside those its own Get counts.
	skipped atomic.Int64
}

// demotion is a block on its way from tier level to level+1.
type demotion struct {
	key       block.Key
	info      BlockInfo
	h         *Handle
	level     int
	weight    int64
	cancelled bool // guarded by inflight's mutex
}

type promotion struct {
	key    block.Key
	h      *Handle // a clone of the reader's handle, released after copying
	weight int64
}

// PutResult says what a put did.
type PutResult struct {
	// Created is false when the block was already stored (and not
	// rewritten).
	Created bool
	// Tier names the tier that holds the block.
	Tier string
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
		tiers:     tiers,
		opts:      opts,
		ix:        index.New(index.Options{}),
		demoteSem: semaphore.NewWeighted(opts.DemoteQueueBytes),
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
		demoteQ:    make(chan *demotion, 1024),
		promoteSem: semaphore.NewWeighted(opts.PromoteQueueBytes),
		promoteQ:   make(chan promotion, 256),
		recent:     recent,
		counters:   make([]tierCounters, len(tiers)),
	}
	h.inflight.m = make(map[block.Key]*demotion)
	for i := range h.putting {
		h.putting[i].m = make(map[block.Key]chan struct{})
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
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
	for range opts.DemoteWorkers {
		h.wg.Go(h.demoteLoop)
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

// Put stores value under key in the fastest tier that has room (or can make
// it). A key already stored is not rewritten: the result says Created false.
func (h *Hierarchy) Put(ctx context.Context, key block.Key, value []byte, opts PutOptions) (PutResult, error) {
	return h.put(ctx, key, int64(len(value)), opts, func(t Tier) error { return t.Put(ctx, key, value, opts) })
}

// Create reserves room for a block of size bytes in the fastest tier that
// has it and returns a Writer; the block becomes visible, and indexed, on
// Commit. A key already stored returns ErrExists.
func (h *Hierarchy) Create(ctx context.Context, key block.Key, size int64, opts PutOptions) (Writer, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	if e, ok := h.ix.Get(key); ok && e.Tiers != 0 {
		return nil, ErrExists
	}
	var last error
	for level, t := range h.tiers {
		w, err := t.Create(ctx, key, size, opts)
		switch {
		case err == nil:
			return &hierWriter{Writer: w, h: h, key: key, level: level, size: size}, nil
		case errors.Is(err, ErrExists):
			return nil, err
		case errors.Is(err, ErrTooLarge), errors.Is(err, ErrNoSpace), errors.Is(err, ErrUnavailable):
			last = err
			continue
		default:
			return nil, err
		}
	}
	return nil, last
}

// hierWriter indexes the block when the tier's writer commits.
type hierWriter struct {
	Writer
	h     *Hierarchy
	key   block.Key
	level int
	size  int64
}

// Commit makes the tier's copy durable (an SSD writer's write and sync)
// without the key's stripe lock, then indexes it under the lock.
func (w *hierWriter) Commit(ctx context.Context) error {
	if err := w.Writer.Commit(ctx); err != nil {
		return err
	}
	w.h.indexCopy(w.key, w.level)
	return nil
}

// put writes the block to the fastest tier that takes it. The write (for
// the SSD tier: the record and its sync) runs without the key's stripe lock,
// so a slow disk delays only this key, not the other keys of its stripe;
// the lock covers only the index update (indexCopy). Puts of the same key
// still run one at a time (startPut): a second waits for the first and then
// finds the block stored.
func (h *Hierarchy) put(ctx context.Context, key block.Key, size int64, opts PutOptions, put func(Tier) error) (PutResult, error) {
	if h.closed.Load() {
		return PutResult{}, ErrClosed
	}
	done, err := h.startPut(ctx, key)
	if err != nil {
		return PutResult{}, err
	}
	defer done()
	if e, ok := h.ix.Get(key); ok && e.Tiers != 0 {
		return PutResult{Created: false, Tier: h.tiers[e.Tiers.Top()].Name()}, nil
	}
	var last error
	for level, t := range h.tiers {
		err := put(t)
		switch {
		case err == nil, errors.Is(err, ErrExists):
			// If the copy is gone again before it could be indexed
			// (evicted, or deleted meanwhile), the put still succeeded:
			// the store simply let the block go.
			h.indexCopy(key, level)
			return PutResult{Created: err == nil, Tier: t.Name()}, nil
		case errors.Is(err, ErrTooLarge), errors.Is(err, ErrNoSpace), errors.Is(err, ErrUnavailable):
			last = err
		default:
			return PutResult{}, err
		}
	}
	return PutResult{}, last
}

// startPut waits until no other put of key is in progress and marks one;
// done ends it. Only puts of the same key wait for each other.
func (h *Hierarchy) startPut(ctx context.Context, key block.Key) (done func(), err error) {
	p := &h.putting[key[0]]
	for {
		p.Lock()
		ch, busy := p.m[key]
		if !busy {
			ch = make(chan struct{})
			p.m[key] = ch
			p.Unlock()
			return func() {
				p.Lock()
				delete(p.m, key)
				p.Unlock()
				close(ch)
			}, nil
		}
		p.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

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

// Get returns a pinned view of the block from the fastest tier holding it,
// and that tier's position (0 = fastest). The caller must Release the
// handle. A copy found corrupt in a tier is dropped there and the next copy
// is tried. When no local tier has the block and a RemoteReader is set, the
// block is read from another node and the position is RemoteLevel; Fetch
// also says which node.
func (h *Hierarchy) Get(ctx context.Context, key block.Key) (*Handle, int, error) {
	hd, o, err := h.Fetch(ctx, key)
	return hd, o.Level, err
}

// GetLocal is Get without the RemoteReader and without access listeners: a
// node serving a block to another node uses it, so the reader's access is
// not counted twice and a miss never turns into a fetch of its own.
func (h *Hierarchy) GetLocal(ctx context.Context, key block.Key) (*Handle, int, error) {
	return h.getLocal(ctx, key)
}

func (h *Hierarchy) getLocal(ctx context.Context, key block.Key) (*Handle, int, error) {
	if h.closed.Load() {
		return nil, -1, ErrClosed
	}
	e, ok := h.ix.Get(key)
	if !ok {
		h.Missed()
		return nil, -1, ErrNotFound
	}
	var corrupt error
	for level, t := range h.tiers {
		if !e.Tiers.Has(level) {
			h.counters[level].skipped.Add(1)
			continue
		}
		hd, err := t.Get(ctx, key)
		switch {
		case err == nil:
			h.hits.Add(1)
			h.ix.Touch(key, uint32(h.opts.Now().Unix()))
			if level > 0 {
				h.maybePromote(key, hd)
			}
			return hd, level, nil
		case errors.Is(err, ErrNotFound):
			if hd := h.inflightHandle(key, level); hd != nil {
				h.hits.Add(1)
				return hd, level, nil
			}
			h.clearCopy(key, level, e.Loc) // evicted since the index was read
		case errors.Is(err, ErrCorrupt):
			corrupt = err
			h.clearCopy(key, level, e.Loc)
		default:
			return nil, -1, err
		}
	}
	h.misses.Add(1)
	if corrupt != nil {
		return nil, -1, corrupt
	}
	return nil, -1, ErrNotFound
}

func (h *Hierarchy) inflightHandle(key block.Key, level int) *Handle {
	h.inflight.Lock()
	defer h.inflight.Unlock()
	if d := h.inflight.m[key]; d != nil && d.level == level && !d.cancelled {
		return d.h.Clone()
	}
	return nil
}

// Missed counts a read of a block that found nothing without calling Get:
// a front end whose own records (a tenant's namespace, a name's expiry)
// answer before the store is read. It is a miss of the store and of every
// tier, as a Get that finds nothing is. A front end calls it at most once
// per read, and never for a read whose Get it made.
func (h *Hierarchy) Missed() {
	h.misses.Add(1)
	for level := range h.tiers {
		h.counters[level].skipped.Add(1)
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

// Delete removes the block from every tier. It returns ErrNotFound if no
// tier held it.
func (h *Hierarchy) Delete(key block.Key) error {
	if h.closed.Load() {
		return ErrClosed
	}
	mu := h.lock(key)
	mu.Lock()
	defer mu.Unlock()
	// The index entry is the block's existence: removing it, together with
	// cancelling a demotion in flight, is the moment of deletion. A
	// demotion only commits, or even starts, while the entry exists.
	h.inflight.Lock()
	if d := h.inflight.m[key]; d != nil {
		d.cancelled = true // the worker deletes whatever it wrote
	}
	before, _ := h.ix.Get(key)
	found := h.ix.Delete(key)
	h.inflight.Unlock()
	for level := range h.tiers {
		if before.Tiers.Has(level) {
			h.changed(key, level, false)
		}
	}
	for _, t := range h.tiers {
		switch err := t.Delete(key); {
		case err == nil:
			found = true
		case errors.Is(err, ErrNotFound):
		default:
			return err
		}
	}
	if !found {
		return ErrNotFound
	}
	return nil
}

// Pin soft-pins the block until the given time in every tier holding it
// (a zero time unpins). It fails with ErrNoSpace if no tier could take the
// pin within its pinned-bytes limit.
func (h *Hierarchy) Pin(key block.Key, until time.Time) error {
	if h.closed.Load() {
		return ErrClosed
	}
	mu := h.lock(key)
	mu.Lock()
	defer mu.Unlock()
	e, ok := h.ix.Get(key)
	if !ok || e.Tiers == 0 {
		return ErrNotFound
	}
	// The index records the pin first: a demotion in flight reads it after
	// writing its copy and pins that copy too.
	prev := e.PinnedUntil
	h.ix.Update(key, func(e index.Entry, ok bool) (index.Entry, bool) {
		e.PinnedUntil = unixSeconds(until)
		return e, ok
	})
	pinned := false
	var last error
	for level, t := range h.tiers {
		if !e.Tiers.Has(level) {
			continue
		}
		switch err := t.Pin(key, until); {
		case err == nil:
			pinned = true
		case errors.Is(err, ErrNotFound):
			// In flight to the next tier; the demotion applies the pin.
			pinned = pinned || h.inflightHandleExists(key)
		default:
			last = err
		}
	}
	if !pinned && !until.IsZero() {
		h.ix.Update(key, func(e index.Entry, ok bool) (index.Entry, bool) {
			e.PinnedUntil = prev
			return e, ok
		})
		if last == nil {
			last = ErrNotFound
		}
		return last
	}
	h.changed(key, e.Tiers.Top(), true)
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
	d := &demotion{key: key, info: info, h: hd, level: level, weight: min(info.Size+1, h.opts.DemoteQueueBytes)}
	if !h.demoteSem.TryAcquire(d.weight) {
		if h.opts.DemoteWhenFull == DemoteDrop {
			h.dropDemotion(d)
			return
		}
		if err := h.demoteSem.Acquire(ctx, d.weight); err != nil {
			h.dropDemotion(d)
			return
		}
	}
	h.inflight.Lock()
	if e, ok := h.ix.Get(key); !ok || !current(e, level, version) {
		h.inflight.Unlock() // deleted or replaced while being evicted
		h.demoteSem.Release(d.weight)
		hd.Release()
		return
	}
	h.inflight.m[key] = d
	h.inflight.Unlock()
	select {
	case h.demoteQ <- d:
	case <-h.ctx.Done():
		h.finishDemotion(d)
		h.demoteSem.Release(d.weight)
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

func (h *Hierarchy) demoteLoop() {
	for {
		select {
		case d := <-h.demoteQ:
			h.demote(d)
		case <-h.ctx.Done():
			// Drain what is queued so pins and space are released.
			for {
				select {
				case d := <-h.demoteQ:
					h.finishDemotion(d)
					h.demoteSem.Release(d.weight)
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
	defer h.demoteSem.Release(d.weight)
	next := d.level + 1
	lower := h.tiers[next]
	e, _ := h.ix.Get(d.key)
	// A known checksum is verified on the way down; otherwise the lower
	// tier takes the first one, as it writes.
	opts := PutOptions{Meta: d.info.Meta}
	opts.Checksum, opts.HasChecksum = d.h.KnownChecksum()
	if e.PinnedUntil != 0 {
		opts.PinnedUntil = time.Unix(int64(e.PinnedUntil), 0)
	}
	err := lower.Put(h.ctx, d.key, d.h.Bytes(), opts)
	wrote := err == nil || errors.Is(err, ErrExists)

	h.inflight.Lock()
	cancelled := d.cancelled
	var pinnedUntil uint32
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
		lower.Delete(d.key) // deleted while in flight: undo the copy
	case !wrote:
		h.clearCopy(d.key, d.level, d.info.Version)
		// A degraded tier says why once, in its own log and Health; a
		// line per dropped block would flood the log.
		if !errors.Is(err, ErrNoSpace) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrUnavailable) {
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
	}
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
	info, err := h.tiers[e.Tiers.Top()].Stat(p.key)
	if err != nil {
		return
	}
	opts := PutOptions{Checksum: p.h.Checksum(), HasChecksum: true, Meta: info.Meta}
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
// the lock it is then indexed only if the block is still stored, and
// removed again if a Delete ran meanwhile, so a delete is never undone.
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
	opts := PutOptions{Meta: info.Meta}
	opts.Checksum, opts.HasChecksum = hd.KnownChecksum()
	if err := lower.Put(ctx, k, hd.Bytes(), opts); err != nil {
		return false
	}
	mu := h.lock(k)
	mu.Lock()
	defer mu.Unlock()
	if _, ok := h.ix.Get(k); !ok {
		_ = lower.Delete(k) // deleted while the copy was written
		return false
	}
	if info, err := lower.Stat(k); err == nil {
		h.setTier(k, level+1, info)
	}
	return true
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
