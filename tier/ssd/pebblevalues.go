package ssd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/expiry"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/policy"
)

// PebbleStore is the SSD tier with values stored inside pebble: key ->
// block.Header || metadata length u16 || metadata || stored payload, and for
// a block of a retention class other than normal a second record (see
// classKey). It evicts block by block through a policy, one queue per
// retention class (low before normal before high; hard pins are in none),
// and counts capacity in logical bytes: pebble's own space amplification
// (obsolete values awaiting compaction) comes on top. It exists to be
// measured against the segment layout (see the package doc); both pass the
// same conformance suite.
type PebbleStore struct {
	opts    Options
	db      *pebble.DB
	codec   *codec
	onEvict atomic.Pointer[tier.EvictHandler]

	mu struct {
		sync.Mutex
		blocks  map[block.Key]*pentry
		policy  *policy.Classed[block.Key]
		pins    expiry.Heap[block.Key]
		retains expiry.Heap[block.Key] // ends of classes
		used    int64
		pinned  int64
		closed  bool
	}
	counters
	versions atomic.Uint64
	dead     atomic.Bool // pebble's commit pipeline failed: no more writes
}

// dbWrite runs a pebble write unless the instance is poisoned, and notes
// when it becomes so: this layout has no second instance to turn to.
func (p *PebbleStore) dbWrite(fn func() error) error {
	if p.dead.Load() {
		return fmt.Errorf("%w: ssd: the values store failed a write; restart the node to recover", tier.ErrUnavailable)
	}
	err := fn()
	if pe := (*poisonedError)(nil); errors.As(err, &pe) {
		p.dead.Store(true)
	}
	return err
}

var (
	_ tier.Tier          = (*PebbleStore)(nil)
	_ tier.EvictNotifier = (*PebbleStore)(nil)
	_ tier.Retainer      = (*PebbleStore)(nil)
)

type pentry struct {
	version     uint64
	hdr         block.Header
	meta        []byte
	size        int64 // bytes counted against capacity
	pinnedUntil int64
	retention   tier.Retention
	retainUntil int64 // Unix nanoseconds; 0: the class does not end
	inPolicy    bool
	committed   bool
}

const prefixValue = 'v'

func valueKey(k block.Key) []byte {
	b := make([]byte, 1+block.KeySize)
	b[0] = prefixValue
	copy(b[1:], k[:])
	return b
}

// OpenPebble opens or creates a values-in-pebble tier in opts.Dir.
func OpenPebble(opts Options) (*PebbleStore, error) {
	opts.EnsureDefaults()
	parsed, err := opts.check()
	if err != nil {
		return nil, err
	}
	c, err := newCodec(parsed.codec, opts.MaxBlockSize)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("ssd: %w", err)
	}
	db, err := openPebble(opts.Dir, opts.IndexCacheSize, opts.IndexFS, opts.Logger)
	if err != nil {
		c.close()
		return nil, err
	}
	p := &PebbleStore{opts: opts, db: db, codec: c}
	p.mu.blocks = make(map[block.Key]*pentry)
	p.mu.policy = parsed.policy
	classes, err := p.readClasses()
	if err != nil {
		c.close()
		closeIndex(db)
		return nil, err
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixValue}, UpperBound: []byte{prefixValue + 1}})
	if err != nil {
		return nil, fmt.Errorf("ssd: reading values: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		v := it.Value()
		hdr, meta, _, err := splitValue(v)
		if err != nil || len(it.Key()) != 1+block.KeySize {
			continue // not listed; a corrupt value is never served
		}
		var k block.Key
		copy(k[:], it.Key()[1:])
		e := &pentry{hdr: hdr, meta: append([]byte(nil), meta...), size: int64(len(v)), committed: true, version: p.versions.Add(1)}
		if cl, ok := classes[k]; ok {
			p.startClassLocked(k, e, cl.r, cl.until)
			delete(classes, k)
		}
		p.mu.blocks[k] = e
		p.placeLocked(k, e, policy.Info[block.Key]{Size: e.size})
		p.mu.used += e.size
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("ssd: reading values: %w", err)
	}
	p.dropOrphanClasses(classes)
	return p, nil
}

// Name implements tier.Tier.
func (p *PebbleStore) Name() string { return p.opts.Name }

// SetEvictHandler implements tier.EvictNotifier; handles are nil.
func (p *PebbleStore) SetEvictHandler(fn tier.EvictHandler) { p.onEvict.Store(&fn) }

// Put implements tier.Tier.
func (p *PebbleStore) Put(ctx context.Context, key block.Key, value []byte, opts tier.PutOptions) error {
	if int64(len(value)) > p.opts.MaxBlockSize {
		return fmt.Errorf("%w: %d bytes, the SSD tier takes at most %d", tier.ErrTooLarge, len(value), p.opts.MaxBlockSize)
	}
	if len(opts.Meta) > tier.MaxMeta {
		return fmt.Errorf("%w: %d bytes, at most %d", tier.ErrMeta, len(opts.Meta), tier.MaxMeta)
	}
	sum := block.Checksum(value)
	if opts.HasChecksum && sum != opts.Checksum {
		return fmt.Errorf("%w: got crc32c %08x, want %08x", tier.ErrChecksum, sum, opts.Checksum)
	}
	stored, kind := p.codec.compress(value)
	hdr := block.Header{Codec: kind, RawLen: uint32(len(value)), StoredLen: uint32(len(stored)), Checksum: sum}
	rec := make([]byte, block.HeaderSize+2+len(opts.Meta)+len(stored))
	hdr.Encode(rec)
	rec[block.HeaderSize], rec[block.HeaderSize+1] = byte(len(opts.Meta)), byte(len(opts.Meta)>>8)
	copy(rec[block.HeaderSize+2:], opts.Meta)
	copy(rec[block.HeaderSize+2+len(opts.Meta):], stored)

	e := &pentry{hdr: hdr, meta: append([]byte(nil), opts.Meta...), size: int64(len(rec)), version: p.versions.Add(1)}
	victims, err := p.reserve(key, e)
	p.dropVictims(ctx, victims)
	if err != nil {
		return err
	}
	wo := pebble.Sync
	if p.opts.NoSync {
		wo = pebble.NoSync
	}
	class := retention{opts.Retention, tier.UnixNanos(opts.RetainUntil)}
	if !class.r.Valid() || class.until != 0 && class.until <= p.opts.Now().UnixNano() {
		class = retention{}
	}
	if err := p.dbWrite(func() error { return p.writeValue(key, rec, class, wo) }); err != nil {
		p.mu.Lock()
		delete(p.mu.blocks, key)
		p.mu.used -= e.size
		p.mu.Unlock()
		return fmt.Errorf("%w: ssd: writing block: %w", tier.ErrUnavailable, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e.committed = true
	p.puts.Add(1)
	p.startClassLocked(key, e, class.r, class.until)
	if u := pinNanos(opts.PinnedUntil); u > p.opts.Now().UnixNano() && p.mu.pinned+int64(hdr.RawLen) <= p.opts.pinLimit() {
		e.pinnedUntil = u
		p.mu.pinned += int64(hdr.RawLen)
		p.mu.pins.Push(u, key)
		return nil
	}
	p.placeLocked(key, e, policy.Info[block.Key]{Size: e.size, Parent: opts.Parent, HasParent: opts.HasParent})
	return nil
}

// reserve claims key (uncommitted) and room for it, evicting by policy.
func (p *PebbleStore) reserve(key block.Key, e *pentry) ([]block.Key, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, tier.ErrClosed
	}
	if _, ok := p.mu.blocks[key]; ok {
		return nil, tier.ErrExists
	}
	p.expirePinsLocked()
	p.expireRetainsLocked()
	var victims []block.Key
	for p.mu.used+e.size > p.opts.Capacity {
		k, ok := p.mu.policy.Evict(nil)
		if !ok {
			return victims, fmt.Errorf("%w: %d bytes wanted, %d of %d used and nothing evictable", tier.ErrNoSpace, e.size, p.mu.used, p.opts.Capacity)
		}
		v := p.mu.blocks[k]
		delete(p.mu.blocks, k)
		p.mu.used -= v.size
		victims = append(victims, k)
	}
	p.mu.blocks[key] = e
	p.mu.used += e.size
	return victims, nil
}

func (p *PebbleStore) dropVictims(ctx context.Context, victims []block.Key) {
	if len(victims) == 0 {
		return
	}
	p.evictions.Add(int64(len(victims)))
	b := p.db.NewBatch()
	for _, k := range victims {
		b.Delete(valueKey(k), nil)
		b.Delete(classKey(k), nil)
	}
	if err := p.dbWrite(func() error { return commitBatch(b, pebble.NoSync) }); err != nil {
		p.opts.Logger.Warn("ssd: deleting evicted blocks", "err", err)
	}
	if h := p.onEvict.Load(); h != nil {
		for _, k := range victims {
			(*h)(ctx, k, tier.BlockInfo{}, nil)
		}
	}
}

// Create implements tier.Tier, buffering the block until Commit.
func (p *PebbleStore) Create(ctx context.Context, key block.Key, size int64, opts tier.PutOptions) (tier.Writer, error) {
	if size < 0 || size > p.opts.MaxBlockSize {
		return nil, fmt.Errorf("%w: %d bytes, the SSD tier takes at most %d", tier.ErrTooLarge, size, p.opts.MaxBlockSize)
	}
	if _, err := p.Stat(key); err == nil {
		return nil, tier.ErrExists
	}
	return &bufWriter{buf: make([]byte, 0, size), size: int(size), commit: func(ctx context.Context, v []byte) error {
		return p.Put(ctx, key, v, opts)
	}}, nil
}

// Get implements tier.Tier.
func (p *PebbleStore) Get(_ context.Context, key block.Key) (*tier.Handle, error) {
	p.mu.Lock()
	e, ok := p.mu.blocks[key]
	if p.mu.closed {
		p.mu.Unlock()
		return nil, tier.ErrClosed
	}
	if !ok || !e.committed {
		p.mu.Unlock()
		p.misses.Add(1)
		return nil, tier.ErrNotFound
	}
	if e.inPolicy {
		p.mu.policy.Access(key)
	}
	p.mu.Unlock()
	v, closer, err := p.db.Get(valueKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		p.misses.Add(1) // evicted or deleted since the lookup
		return nil, tier.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("ssd: reading block: %w", err)
	}
	raw, err := p.decode(v)
	closer.Close()
	if err != nil {
		p.mu.Lock()
		if p.mu.blocks[key] == e {
			p.removeLocked(key, e)
			p.corrupt.Add(1)
		}
		p.mu.Unlock()
		p.dbWrite(func() error { return p.deleteValue(key) })
		return nil, fmt.Errorf("ssd: block %v: %w", key, err)
	}
	p.hits.Add(1)
	return tier.NewHandle(raw, e.hdr.Checksum, nil), nil
}

// splitValue parses a stored value into its header, metadata and payload.
func splitValue(v []byte) (block.Header, []byte, []byte, error) {
	hdr, err := block.DecodeHeader(v)
	if err != nil {
		return hdr, nil, nil, err
	}
	if len(v) < block.HeaderSize+2 {
		return hdr, nil, nil, fmt.Errorf("%w: value of %d bytes has no metadata length", block.ErrCorrupt, len(v))
	}
	metaLen := int(v[block.HeaderSize]) | int(v[block.HeaderSize+1])<<8
	if len(v) != block.HeaderSize+2+metaLen+int(hdr.StoredLen) {
		return hdr, nil, nil, fmt.Errorf("%w: value is %d bytes, its header says %d", block.ErrCorrupt, len(v), block.HeaderSize+2+metaLen+int(hdr.StoredLen))
	}
	meta := v[block.HeaderSize+2 : block.HeaderSize+2+metaLen]
	return hdr, meta, v[block.HeaderSize+2+metaLen:], nil
}

// decode verifies a stored value and returns a private copy of its payload.
func (p *PebbleStore) decode(v []byte) ([]byte, error) {
	hdr, _, stored, err := splitValue(v)
	if err != nil {
		return nil, err
	}
	raw, err := p.codec.decompress(stored, hdr)
	if err != nil {
		return nil, err
	}
	if hdr.Codec == block.CodecNone {
		raw = append([]byte(nil), raw...) // v is only valid until closer.Close
	}
	return raw, hdr.Verify(raw)
}

func (p *PebbleStore) removeLocked(key block.Key, e *pentry) {
	delete(p.mu.blocks, key)
	p.mu.used -= e.size
	if e.inPolicy {
		p.mu.policy.Remove(key)
	}
	if e.pinnedUntil != 0 {
		p.mu.pinned -= int64(e.hdr.RawLen)
	}
}

// Stat implements tier.Tier.
func (p *PebbleStore) Stat(key block.Key) (tier.BlockInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.mu.blocks[key]
	if !ok || !e.committed {
		return tier.BlockInfo{}, tier.ErrNotFound
	}
	return e.info(), nil
}

func (e *pentry) info() tier.BlockInfo {
	info := blockInfo(e.hdr, e.meta, e.pinnedUntil, e.version)
	info.Retention, info.RetainUntil = e.retention, tier.FromUnixNanos(e.retainUntil)
	return info
}

// Delete implements tier.Tier.
func (p *PebbleStore) Delete(key block.Key) error {
	p.mu.Lock()
	e, ok := p.mu.blocks[key]
	if !ok || !e.committed || p.mu.closed {
		p.mu.Unlock()
		if p.mu.closed {
			return tier.ErrClosed
		}
		return tier.ErrNotFound
	}
	p.removeLocked(key, e)
	p.mu.Unlock()
	p.deletes.Add(1)
	if err := p.dbWrite(func() error { return p.deleteValue(key) }); err != nil {
		return fmt.Errorf("%w: ssd: deleting block: %w", tier.ErrUnavailable, err)
	}
	return nil
}

// Pin implements tier.Tier. Pins are not persisted by this layout.
func (p *PebbleStore) Pin(key block.Key, until time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.mu.blocks[key]
	if !ok || !e.committed {
		return tier.ErrNotFound
	}
	p.expirePinsLocked()
	u := pinNanos(until)
	if u <= p.opts.Now().UnixNano() {
		p.unpinLocked(key, e)
		return nil
	}
	if e.pinnedUntil == 0 {
		if p.mu.pinned+int64(e.hdr.RawLen) > p.opts.pinLimit() {
			return fmt.Errorf("%w: soft pins would exceed their limit of %d bytes", tier.ErrNoSpace, p.opts.pinLimit())
		}
		p.mu.pinned += int64(e.hdr.RawLen)
	}
	if e.inPolicy {
		p.mu.policy.Remove(key)
		e.inPolicy = false
	}
	e.pinnedUntil = u
	p.mu.pins.Push(u, key)
	return nil
}

func (p *PebbleStore) unpinLocked(key block.Key, e *pentry) {
	if e.pinnedUntil != 0 {
		p.mu.pinned -= int64(e.hdr.RawLen)
		e.pinnedUntil = 0
	}
	p.placeLocked(key, e, policy.Info[block.Key]{Size: e.size})
}

func (p *PebbleStore) expirePinsLocked() {
	p.mu.pins.Expire(p.opts.Now().UnixNano(), func(k block.Key, until int64) {
		if e := p.mu.blocks[k]; e != nil && e.pinnedUntil == until {
			p.unpinLocked(k, e)
		}
	})
}

// Range implements tier.Tier.
func (p *PebbleStore) Range(fn func(block.Key, tier.BlockInfo) bool) {
	p.mu.Lock()
	items := make([]tier.KeyInfo, 0, len(p.mu.blocks))
	for k, e := range p.mu.blocks {
		if e.committed {
			items = append(items, tier.KeyInfo{Key: k, Info: e.info()})
		}
	}
	p.mu.Unlock()
	tier.Visit(items, fn)
}

// Stats implements tier.Tier.
func (p *PebbleStore) Stats() tier.Stats {
	p.mu.Lock()
	p.expirePinsLocked()
	p.expireRetainsLocked()
	st := tier.Stats{Name: p.opts.Name, Capacity: p.opts.Capacity, Used: p.mu.used, Pinned: p.mu.pinned}
	for _, e := range p.mu.blocks {
		if e.committed {
			st.Blocks++
		}
	}
	p.mu.Unlock()
	p.counters.addTo(&st)
	return st
}

// Close implements tier.Tier.
func (p *PebbleStore) Close() error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil
	}
	p.mu.closed = true
	p.mu.Unlock()
	var err error
	if !p.dead.Load() { // a poisoned instance cannot be closed (poisonedError)
		err = errors.Join(flushIndex(p.db), closeIndex(p.db))
	}
	p.codec.close()
	return err
}

var _ io.ReaderFrom = (*bufWriter)(nil)
