package dram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/expiry"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/policy"
)

// Options configures a DRAM tier. A field with a YAML name is an
// operator's setting, the dram section of yuebing serve's configuration
// (YUEBING_DRAM_* variables); the others are set in code.
type Options struct {
	// Capacity of the arena in bytes. Required. Rounded down to 64 bytes.
	Capacity int64 `yaml:"-"`
	// MaxBlockSize is the largest block accepted, in bytes. Default
	// min(256 MiB, Capacity).
	MaxBlockSize int64 `yaml:"-"`
	// Policy names the eviction policy (see policy.Names). Default "lru".
	Policy string `yaml:"policy"`
	// MaxPinnedFraction bounds the share of Capacity that soft pins may hold,
	// so pinned contexts cannot starve puts. Default 0.5.
	MaxPinnedFraction float64 `yaml:"-"`
	// MaxWait bounds how long a put waits for evicted blocks still being
	// read or demoted to give back their space, beyond which it returns
	// ErrNoSpace. Default 10s; the put's context can end it sooner.
	MaxWait time.Duration `yaml:"-"`
	// NoHugePages turns off transparent huge pages for the arena. Huge
	// pages cut TLB misses on multi-megabyte blocks. Default false.
	NoHugePages bool `yaml:"-"`
	// Prefault populates the whole arena before New returns, trading
	// start-up time for no page faults on first writes. Default false: the
	// arena's pages are committed as blocks are first stored in them, so an
	// idle node holds next to no memory whatever its capacity. A first
	// write to a page costs a fault and zeroing, which on virtual machines
	// runs at a few hundred MB/s (docs/benchmarks.md), an order of
	// magnitude below copy bandwidth.
	Prefault bool `yaml:"prefault"`
	// BackgroundPrefault populates the arena from a background goroutine
	// after New returns, 16 MiB at a time (MADV_POPULATE_WRITE, which
	// never changes a page's contents, so it is safe beside puts): start-up
	// stays instant and puts soon find warm pages, but the whole capacity
	// is resident within seconds. On kernels before 5.14 it stops at the
	// first refusal. Ignored with Prefault. Default false.
	BackgroundPrefault bool `yaml:"prefault_background"`
	// EagerChecksum computes every block's CRC-32C as it is written. By
	// default a block's checksum is computed the first time something needs
	// it (a demotion to SSD, a transfer, a reader that asks) and kept:
	// reads from DRAM are not verified, so a checksum taken at put time
	// would only add a second pass over memory to every put, about halving
	// put bandwidth (docs/benchmarks.md). A put that carries a checksum is
	// always verified before it commits.
	EagerChecksum bool `yaml:"eager_checksum"`
	// Name in stats and logs. Default "dram".
	Name string `yaml:"-"`
	// Now is the clock for soft pins. Default time.Now.
	Now func() time.Time `yaml:"-"`
	// Logger. Default slog.Default().
	Logger *slog.Logger `yaml:"-"`
}

// EnsureDefaults fills in zero fields.
func (o *Options) EnsureDefaults() {
	o.Capacity &^= granuleSize - 1
	if o.MaxBlockSize == 0 {
		o.MaxBlockSize = min(256<<20, o.Capacity)
	}
	if o.Policy == "" {
		o.Policy = "lru"
	}
	if o.MaxPinnedFraction == 0 {
		o.MaxPinnedFraction = 0.5
	}
	if o.MaxWait == 0 {
		o.MaxWait = 10 * time.Second
	}
	if o.Name == "" {
		o.Name = "dram"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	_, err := o.check()
	return err
}

// check validates o and returns the eviction policy its Policy names: New
// uses that one, so the name is parsed in one place and no error of it is
// dropped.
func (o *Options) check() (policy.Policy[block.Key], error) {
	var errs []error
	if o.Capacity < granuleSize {
		errs = append(errs, fmt.Errorf("dram: Capacity %d bytes is below the minimum of %d", o.Capacity, granuleSize))
	}
	if o.MaxBlockSize <= 0 || o.MaxBlockSize > o.Capacity || o.MaxBlockSize > block.MaxPayload {
		errs = append(errs, fmt.Errorf("dram: MaxBlockSize %d must be in (0, min(Capacity, 4 GiB)]", o.MaxBlockSize))
	}
	// One queue per evictable retention class (tier.Retention), each in
	// the named policy's order.
	pol, err := policy.NewClassed[block.Key](o.Policy, o.Capacity, tier.NumRanks)
	if err != nil {
		errs = append(errs, fmt.Errorf("dram: Policy: %w", err))
	}
	if o.MaxPinnedFraction < 0 || o.MaxPinnedFraction > 1 {
		errs = append(errs, fmt.Errorf("dram: MaxPinnedFraction %v must be in [0, 1]", o.MaxPinnedFraction))
	}
	if o.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("dram: MaxWait %v must not be negative", o.MaxWait))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return pol, nil
}

// DRAM is the DRAM tier. It is safe for concurrent use.
//
// One mutex guards the block map, the policy and the allocator. Its critical
// sections are map and list operations, never byte copies or I/O, so it is
// held for well under a microsecond while the copies it brackets move
// megabytes.
type DRAM struct {
	opts    Options
	arena   []byte
	onEvict atomic.Pointer[tier.EvictHandler]

	// prefault runs the background prefault; stopPrefault ends it and
	// prefaulted is closed when it is done.
	prefault     sync.WaitGroup
	stopPrefault atomic.Bool
	prefaulted   chan struct{}

	mu struct {
		sync.Mutex
		alloc   *allocator
		blocks  map[block.Key]*blk
		policy  policy.Policy[block.Key]
		pins    expiry.Heap[*blk]
		retains expiry.Heap[*blk] // retention classes with an end (blk.retainUntil)
		pinned  int64             // bytes of soft-pinned blocks
		version uint64            // the last block version handed out
		space   chan struct{}
		closed  bool
		handles int64 // outstanding Handles and Writers; the arena is unmapped when Close finds none
	}
	hits, misses, puts, deletes, evictions atomic.Int64
}

var (
	_ tier.Tier          = (*DRAM)(nil)
	_ tier.EvictNotifier = (*DRAM)(nil)
	_ tier.Retainer      = (*DRAM)(nil)
)

type blockState uint8

const (
	stateLive     blockState = iota
	stateEvicting            // chosen as a victim; readable until the handler returns
	stateDead                // gone from the map; space freed when pins reach zero
)

// blk is a stored block. All fields but the immutable ones are guarded by
// the tier's mutex.
type blk struct {
	t           *DRAM
	key         block.Key
	span        int32
	off, size   int64
	metaLen     int64         // PutOptions.Meta, stored in the arena right after the value
	version     uint64        // see tier.BlockInfo.Version
	sum         atomic.Uint64 // CRC-32C | sumKnown once computed
	pins        int32
	state       blockState
	inPolicy    bool
	pinnedUntil int64 // Unix nanoseconds; 0 when not soft-pinned
	retention   tier.Retention
	retainUntil int64 // Unix nanoseconds when retention lapses to Normal; 0: never
}

// New maps the arena and returns an empty tier.
func New(opts Options) (*DRAM, error) {
	opts.EnsureDefaults()
	pol, err := opts.check()
	if err != nil {
		return nil, err
	}
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_NORESERVE
	if opts.Prefault {
		flags |= unix.MAP_POPULATE
	}
	arena, err := unix.Mmap(-1, 0, int(opts.Capacity), unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return nil, fmt.Errorf("dram: mapping a %d-byte arena: %w", opts.Capacity, err)
	}
	if !opts.NoHugePages {
		// Best effort: THP may be disabled system-wide.
		_ = unix.Madvise(arena, unix.MADV_HUGEPAGE)
	}
	d := &DRAM{opts: opts, arena: arena}
	d.mu.alloc = newAllocator(opts.Capacity >> granuleShift)
	d.mu.blocks = make(map[block.Key]*blk)
	d.mu.policy = pol
	d.mu.space = make(chan struct{})
	d.prefaulted = make(chan struct{})
	if opts.BackgroundPrefault && !opts.Prefault {
		d.prefault.Go(d.populate)
	} else {
		close(d.prefaulted)
	}
	return d, nil
}

// populate asks the kernel to back the arena with pages, a chunk at a time,
// until done, refused or told to stop.
func (d *DRAM) populate() {
	defer close(d.prefaulted)
	const chunk = 16 << 20
	for off := 0; off < len(d.arena) && !d.stopPrefault.Load(); off += chunk {
		if err := unix.Madvise(d.arena[off:min(off+chunk, len(d.arena))], unix.MADV_POPULATE_WRITE); err != nil {
			d.opts.Logger.Debug("dram: background prefault stopped", "at", off, "err", err)
			return
		}
	}
}

// Name implements tier.Tier.
func (d *DRAM) Name() string { return d.opts.Name }

// SetEvictHandler implements tier.EvictNotifier. Set it before first use.
func (d *DRAM) SetEvictHandler(fn tier.EvictHandler) { d.onEvict.Store(&fn) }

func (d *DRAM) evictHandler() tier.EvictHandler {
	if p := d.onEvict.Load(); p != nil {
		return *p
	}
	return nil
}

const sumKnown = 1 << 32

// Checksum implements tier.ChecksumCache: the block's CRC-32C, computed on
// first use. Concurrent first uses may both compute it; they agree.
func (b *blk) Checksum(data []byte) uint32 {
	if v := b.sum.Load(); v&sumKnown != 0 {
		return uint32(v)
	}
	sum := block.Checksum(data)
	b.sum.Store(uint64(sum) | sumKnown)
	return sum
}

// KnownChecksum implements tier.ChecksumCache.
func (b *blk) KnownChecksum() (uint32, bool) {
	v := b.sum.Load()
	return uint32(v), v&sumKnown != 0
}

func (b *blk) handle(view []byte) *tier.Handle {
	if sum, ok := b.KnownChecksum(); ok {
		return tier.NewHandle(view, sum, b)
	}
	return tier.NewLazyHandle(view, b)
}

// Put implements tier.Tier. The copy into the arena (and the checksum, when
// one is taken) runs outside the lock, 64 KiB at a time so the checksum
// reads bytes still in cache.
func (d *DRAM) Put(ctx context.Context, key block.Key, value []byte, opts tier.PutOptions) error {
	w, err := d.create(ctx, key, int64(len(value)), opts)
	if err != nil {
		return err
	}
	if !w.summing {
		copy(w.buf, value)
	} else {
		const chunk = 64 << 10
		for off := 0; off < len(value); off += chunk {
			end := min(off+chunk, len(value))
			copy(w.buf[off:end], value[off:end])
			w.sum = block.UpdateChecksum(w.sum, w.buf[off:end])
		}
	}
	w.n = len(value)
	return w.Commit(ctx)
}

// Create implements tier.Tier.
func (d *DRAM) Create(ctx context.Context, key block.Key, size int64, opts tier.PutOptions) (tier.Writer, error) {
	return d.create(ctx, key, size, opts)
}

func (d *DRAM) create(ctx context.Context, key block.Key, size int64, opts tier.PutOptions) (*writer, error) {
	if size < 0 {
		return nil, fmt.Errorf("dram: negative block size %d", size)
	}
	if size > d.opts.MaxBlockSize {
		return nil, fmt.Errorf("%w: %d bytes, the DRAM tier takes at most %d", tier.ErrTooLarge, size, d.opts.MaxBlockSize)
	}
	if len(opts.Meta) > tier.MaxMeta {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", tier.ErrMeta, len(opts.Meta), tier.MaxMeta)
	}
	if !opts.Retention.Valid() {
		return nil, fmt.Errorf("dram: %w: %v", tier.ErrRetention, opts.Retention)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A block on its way out (evicting) does not count: a new copy may
	// replace it, and the hierarchy tells the two apart by version.
	if b, ok := d.mu.blocks[key]; ok && b.state == stateLive {
		return nil, tier.ErrExists
	}
	metaLen := int64(len(opts.Meta))
	id, err := d.reserveLocked(ctx, max(1, granules(size+metaLen)))
	if err != nil {
		return nil, err
	}
	s := d.mu.alloc.spans[id]
	off := s.off << granuleShift
	copy(d.arena[off+size:], opts.Meta)
	d.mu.handles++
	return &writer{d: d, key: key, opts: opts, span: id, off: off, buf: d.arena[off : off+size : off+size],
		summing: d.opts.EagerChecksum || opts.HasChecksum}, nil
}

// reserveLocked allocates g granules, evicting to make room. It may release
// and retake the lock (to call the evict handler or to wait for space).
func (d *DRAM) reserveLocked(ctx context.Context, g int64) (int32, error) {
	var deadline <-chan time.Time
	for {
		if d.mu.closed {
			return nilSpan, tier.ErrClosed
		}
		if id := d.mu.alloc.alloc(g); id != nilSpan {
			return id, nil
		}
		victims, progress := d.evictLocked(g)
		if len(victims) > 0 {
			d.handOff(ctx, victims)
			continue
		}
		if progress {
			continue
		}
		if !d.spaceComingLocked() {
			return nilSpan, fmt.Errorf("%w: %d bytes wanted, %d free in the largest span, the rest pinned or in use",
				tier.ErrNoSpace, g<<granuleShift, d.mu.alloc.largestFree()<<granuleShift)
		}
		if deadline == nil {
			deadline = time.After(d.opts.MaxWait)
		}
		space := d.mu.space
		d.mu.Unlock()
		select {
		case <-space:
			d.mu.Lock()
		case <-ctx.Done():
			d.mu.Lock()
			return nilSpan, fmt.Errorf("dram: waiting for space: %w", ctx.Err())
		case <-deadline:
			d.mu.Lock()
			return nilSpan, fmt.Errorf("%w: no space freed within %v", tier.ErrNoSpace, d.opts.MaxWait)
		}
	}
}

// evictLocked picks victims until their space plus what is free would hold g
// granules. Without an evict handler victims are dropped on the spot and
// progress reports whether any space was freed; with one they are returned,
// marked evicting and pinned for the handler.
func (d *DRAM) evictLocked(g int64) (victims []*blk, progress bool) {
	d.expirePinsLocked()
	d.expireRetainsLocked()
	handler := d.evictHandler()
	evictable := func(k block.Key) bool { return d.mu.blocks[k].pins == 0 }
	pending := int64(0)
	for d.mu.alloc.free+pending < g || len(victims) == 0 && !progress {
		k, ok := d.mu.policy.Evict(evictable)
		if !ok {
			break
		}
		b := d.mu.blocks[k]
		b.inPolicy = false
		d.evictions.Add(1)
		if handler == nil {
			d.removeLocked(b)
			progress = true
			if d.mu.alloc.free >= g {
				break
			}
			continue
		}
		b.state = stateEvicting
		b.pins++
		d.mu.handles++
		victims = append(victims, b)
		pending += d.mu.alloc.spans[b.span].size
	}
	return victims, progress
}

// handOff calls the evict handler for each victim without the lock, then
// drops the victims from the map. The handler's pin keeps their bytes until
// it releases them.
func (d *DRAM) handOff(ctx context.Context, victims []*blk) {
	handler := d.evictHandler()
	d.mu.Unlock()
	for _, b := range victims {
		info := tier.BlockInfo{Size: b.size, Meta: d.meta(b), Version: b.version,
			Retention: b.retention, RetainUntil: tier.FromUnixNanos(b.retainUntil)}
		info.Checksum, info.HasChecksum = b.KnownChecksum()
		handler(ctx, b.key, info, b.handle(d.view(b)))
	}
	d.mu.Lock()
	for _, b := range victims {
		// A handler that already released its pin (a dropped demotion) left
		// the span to be freed here.
		if b.state == stateEvicting {
			d.removeLocked(b)
		}
	}
}

// spaceComingLocked reports whether waiting can help: handles or writers are
// outstanding, so evicted blocks may yet be freed, blocks pinned by readers
// may become evictable, or a writer may abort. Soft pins alone never lapse
// soon enough to wait for.
func (d *DRAM) spaceComingLocked() bool { return d.mu.handles > 0 }

// removeLocked drops b from the map and the policy; its span is freed now if
// nobody holds it, or at the last Release.
func (d *DRAM) removeLocked(b *blk) {
	if b.inPolicy {
		d.mu.policy.Remove(b.key)
		b.inPolicy = false
	}
	if b.pinnedUntil != 0 {
		d.mu.pinned -= b.size
		b.pinnedUntil = 0
	}
	if d.mu.blocks[b.key] == b {
		delete(d.mu.blocks, b.key)
	}
	b.state = stateDead
	if b.pins == 0 {
		d.freeLocked(b.span)
	}
}

func (d *DRAM) freeLocked(span int32) {
	d.mu.alloc.release(span)
	close(d.mu.space)
	d.mu.space = make(chan struct{})
}

func (d *DRAM) view(b *blk) []byte { return d.arena[b.off : b.off+b.size : b.off+b.size] }

// meta returns a copy of the block's metadata; the arena bytes may be reused
// once the block is gone.
func (d *DRAM) meta(b *blk) []byte {
	if b.metaLen == 0 {
		return nil
	}
	return append([]byte(nil), d.arena[b.off+b.size:b.off+b.size+b.metaLen]...)
}

// Retain implements tier.Ref for handles on b.
func (b *blk) Retain() {
	d := b.t
	d.mu.Lock()
	b.pins++
	d.mu.handles++
	d.mu.Unlock()
}

// Release implements tier.Ref.
func (b *blk) Release() {
	d := b.t
	d.mu.Lock()
	defer d.mu.Unlock()
	b.pins--
	if b.pins < 0 {
		panic("BUG: dram: block released more often than retained")
	}
	d.mu.handles--
	if b.pins == 0 && b.state == stateDead {
		d.freeLocked(b.span)
	}
	d.maybeUnmapLocked()
}

// Get implements tier.Tier.
func (d *DRAM) Get(_ context.Context, key block.Key) (*tier.Handle, error) {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return nil, tier.ErrClosed
	}
	b, ok := d.mu.blocks[key]
	if !ok || b.state == stateDead {
		d.mu.Unlock()
		d.misses.Add(1)
		return nil, tier.ErrNotFound
	}
	b.pins++
	d.mu.handles++
	if b.inPolicy {
		d.mu.policy.Access(key)
	}
	d.mu.Unlock()
	d.hits.Add(1)
	return b.handle(d.view(b)), nil
}

// Stat implements tier.Tier.
func (d *DRAM) Stat(key block.Key) (tier.BlockInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.mu.blocks[key]
	if !ok || b.state == stateDead {
		return tier.BlockInfo{}, tier.ErrNotFound
	}
	return d.infoLocked(b), nil
}

func (d *DRAM) infoLocked(b *blk) tier.BlockInfo {
	info := tier.BlockInfo{Size: b.size, Meta: d.meta(b), Version: b.version,
		Retention: b.retention, RetainUntil: tier.FromUnixNanos(b.retainUntil)}
	info.Checksum, info.HasChecksum = b.KnownChecksum()
	if b.pinnedUntil != 0 {
		info.PinnedUntil = time.Unix(0, b.pinnedUntil)
	}
	return info
}

// Delete implements tier.Tier.
func (d *DRAM) Delete(key block.Key) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.mu.blocks[key]
	if !ok || b.state == stateDead {
		return tier.ErrNotFound
	}
	d.removeLocked(b)
	d.deletes.Add(1)
	return nil
}

// Pin implements tier.Tier.
func (d *DRAM) Pin(key block.Key, until time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.mu.blocks[key]
	if !ok || b.state != stateLive {
		return tier.ErrNotFound
	}
	now := d.opts.Now().UnixNano()
	u := until.UnixNano()
	if until.IsZero() || u <= now {
		d.unpinLocked(b)
		return nil
	}
	if b.pinnedUntil == 0 {
		if limit := int64(d.opts.MaxPinnedFraction * float64(d.opts.Capacity)); d.mu.pinned+b.size > limit {
			return fmt.Errorf("%w: soft pins would hold %d bytes, over the limit of %d", tier.ErrNoSpace, d.mu.pinned+b.size, limit)
		}
		d.mu.pinned += b.size
	}
	if b.inPolicy {
		d.mu.policy.Remove(key)
		b.inPolicy = false
	}
	b.pinnedUntil = u
	d.mu.pins.Push(u, b)
	return nil
}

func (d *DRAM) unpinLocked(b *blk) {
	if b.pinnedUntil != 0 {
		d.mu.pinned -= b.size
		b.pinnedUntil = 0
	}
	d.placeLocked(b, policy.Info[block.Key]{Size: b.size})
}

// placeLocked puts a live block that eviction may take into the policy,
// in its retention class's queue. Soft-pinned blocks and hard-pinned ones
// (class Pinned) stay out of it, so no victim search ever walks them.
func (d *DRAM) placeLocked(b *blk, info policy.Info[block.Key]) {
	if b.inPolicy || b.state != stateLive || b.pinnedUntil != 0 {
		return
	}
	rank := tier.Effective(b.retention, b.retainUntil, d.opts.Now().UnixNano()).Rank()
	if rank >= tier.NumRanks {
		return
	}
	info.Class = rank
	d.mu.policy.Add(b.key, info)
	b.inPolicy = true
}

// SetRetention implements tier.Retainer. The block moves to its new
// class's queue at the back, as if just added: a class change is a
// statement about the block's future, not a hit.
func (d *DRAM) SetRetention(key block.Key, r tier.Retention, until time.Time) error {
	if !r.Valid() {
		return fmt.Errorf("dram: %w: %v", tier.ErrRetention, r)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.mu.blocks[key]
	if !ok || b.state != stateLive {
		return tier.ErrNotFound
	}
	r, u := tier.Settle(r, tier.UnixNanos(until), d.opts.Now().UnixNano())
	b.retention, b.retainUntil = r, u
	if u != 0 {
		d.mu.retains.Push(u, b)
	}
	if b.inPolicy {
		d.mu.policy.Remove(key)
		b.inPolicy = false
	}
	d.placeLocked(b, policy.Info[block.Key]{Size: b.size})
	return nil
}

// expireRetainsLocked moves blocks whose retention class lapsed to the
// Normal queue.
func (d *DRAM) expireRetainsLocked() {
	d.mu.retains.Expire(d.opts.Now().UnixNano(), func(b *blk, until int64) {
		// A class that was changed since left a stale entry behind.
		if b.retainUntil != until || b.state != stateLive {
			return
		}
		b.retention, b.retainUntil = tier.RetentionNormal, 0
		if b.inPolicy {
			d.mu.policy.Remove(b.key)
			b.inPolicy = false
		}
		d.placeLocked(b, policy.Info[block.Key]{Size: b.size})
	})
}

// expirePinsLocked returns blocks whose soft pin lapsed to the policy.
func (d *DRAM) expirePinsLocked() {
	d.mu.pins.Expire(d.opts.Now().UnixNano(), func(b *blk, until int64) {
		// A pin that was extended or removed left a stale entry behind.
		if b.pinnedUntil == until && b.state == stateLive {
			d.unpinLocked(b)
		}
	})
}

// Range implements tier.Tier.
func (d *DRAM) Range(fn func(block.Key, tier.BlockInfo) bool) {
	d.mu.Lock()
	items := make([]tier.KeyInfo, 0, len(d.mu.blocks))
	for k, b := range d.mu.blocks {
		if b.state != stateDead {
			items = append(items, tier.KeyInfo{Key: k, Info: d.infoLocked(b)})
		}
	}
	d.mu.Unlock()
	tier.Visit(items, fn)
}

// Stats implements tier.Tier.
func (d *DRAM) Stats() tier.Stats {
	d.mu.Lock()
	used := (d.mu.alloc.total - d.mu.alloc.free) << granuleShift
	blocks := int64(0)
	for _, b := range d.mu.blocks {
		if b.state != stateDead {
			blocks++
		}
	}
	pinned := d.mu.pinned
	d.mu.Unlock()
	return tier.Stats{
		Name: d.opts.Name, Capacity: d.opts.Capacity, Used: used, Blocks: blocks, Pinned: pinned,
		Hits: d.hits.Load(), Misses: d.misses.Load(), Puts: d.puts.Load(), Deletes: d.deletes.Load(),
		Evictions: d.evictions.Load(),
	}
}

// Close implements tier.Tier. Blocks are lost (DRAM is volatile; the
// hierarchy demotes what it wants to keep before closing). The arena is
// unmapped once every outstanding Handle and Writer is released.
func (d *DRAM) Close() error {
	// The prefault must be done with the arena before it can be unmapped.
	d.stopPrefault.Store(true)
	d.prefault.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return nil
	}
	d.mu.closed = true
	close(d.mu.space)
	d.mu.space = make(chan struct{})
	d.maybeUnmapLocked()
	return nil
}

func (d *DRAM) maybeUnmapLocked() {
	if d.mu.closed && d.mu.handles == 0 && d.arena != nil {
		if err := unix.Munmap(d.arena); err != nil {
			d.opts.Logger.Error("dram: unmapping arena", "err", err)
		}
		d.arena = nil
	}
}
