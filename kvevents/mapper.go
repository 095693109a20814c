package kvevents

import (
	"fmt"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// Tiers an engine's media map to, in index.TierMask bits: the engine's
// device memory is the top tier, its CPU offload the next, anything
// slower (a disk or remote medium) the one after.
const (
	TierHBM  = 0
	TierDRAM = 1
	TierDisk = 2
)

// TierOf maps a vLLM medium name to a tier.
func TierOf(medium string) int {
	switch medium {
	case "", "GPU", "gpu", "HBM":
		return TierHBM
	case "CPU", "cpu", "CPU_PINNED", "DRAM":
		return TierDRAM
	}
	return TierDisk
}

// Change is what one block now is on an engine: the tiers holding it,
// zero when the engine no longer holds it.
type Change struct {
	Key   block.Key
	Tiers index.TierMask
}

// Update is what one batch changed on one engine.
type Update struct {
	// Engine names the engine (Options.Engine).
	Engine string
	// Reset drops every block the engine held before Changes apply: it
	// cleared its cache, restarted, or events were lost beyond recovery.
	Reset bool
	// Changes apply in order.
	Changes []Change
	// BlockSize is the block size the keys of Changes are chained with:
	// the engine's, as its events state it (Mapper.BlockSize).
	BlockSize int
}

// mapped is what the Mapper knows of one engine block hash.
type mapped struct {
	key   block.Key
	tiers index.TierMask
}

// Mapper keys an engine's blocks the yuebing way and tracks which tiers
// of the engine hold each. Keys chain from the parent block's key over the
// event's token ids, so a block's key is the one any client computes for
// the same prefix with block.ChainKeys. A Mapper is not safe for concurrent
// use; a Subscriber owns one.
type Mapper struct {
	namespace string
	// configured is the block size the Mapper was made with, blockSize the
	// one it keys with now: the engine's, once its events state one.
	configured int
	blockSize  int
	maxBlocks  int
	root       block.Key
	chain      *block.Chain
	byHash     map[Hash]mapped
	// refs counts, per key and tier, the engine hashes holding it there:
	// two hashes of one key (an engine that hashes more than tokens) must
	// not drop the key when one goes.
	refs map[block.Key]*[index.MaxTiers]int32
	// gone are hashes removed from every tier, oldest first, kept so a
	// later child can still find its parent's key; dropped past maxBlocks.
	gone  []Hash
	stats *Stats
}

// NewMapper returns a Mapper for blocks of blockSize tokens keyed under
// namespace, tracking at most maxBlocks engine hashes.
func NewMapper(namespace string, blockSize, maxBlocks int, stats *Stats) (*Mapper, error) {
	c, err := block.NewChain(namespace, blockSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	if stats == nil {
		stats = new(Stats)
	}
	return &Mapper{
		namespace:  namespace,
		configured: blockSize,
		blockSize:  blockSize,
		maxBlocks:  maxBlocks,
		root:       block.Root(namespace, blockSize),
		chain:      c,
		byHash:     make(map[Hash]mapped),
		refs:       make(map[block.Key]*[index.MaxTiers]int32),
		stats:      stats,
	}, nil
}

// BlockSize returns the block size the Mapper keys with: the configured
// one until the engine's events state another.
func (m *Mapper) BlockSize() int { return m.blockSize }

// Len returns how many engine hashes the Mapper holds a key for.
func (m *Mapper) Len() int { return len(m.byHash) }

// Lookup returns the key of an engine block hash and the tiers holding it.
func (m *Mapper) Lookup(h Hash) (block.Key, index.TierMask, bool) {
	e, ok := m.byHash[h]
	return e.key, e.tiers, ok
}

// Reset forgets everything.
func (m *Mapper) Reset() {
	clear(m.byHash)
	clear(m.refs)
	m.gone = m.gone[:0]
}

// Apply maps a batch's events to changes. Events that cannot be keyed are
// counted and skipped: a block whose parent is unknown (missed events), of
// a LoRA adapter, hashed over more than tokens, or of a block size no key
// takes. A block of another valid size than the Mapper's makes it key with
// that size from then on (adopt): the engine's events, not configuration,
// say what its blocks are.
func (m *Mapper) Apply(b Batch, u *Update) {
	defer func() { u.BlockSize = m.blockSize }()
	for i := range b.Events {
		e := &b.Events[i]
		switch e.Kind {
		case AllBlocksCleared:
			m.stats.Cleared.Add(1)
			m.Reset()
			u.Reset = true
			u.Changes = u.Changes[:0]
		case BlockStored:
			m.stats.Stored.Add(1)
			m.stored(e, u)
		case BlockRemoved:
			m.stats.Removed.Add(1)
			m.removed(e, u)
		}
	}
	if len(m.byHash) > m.maxBlocks || len(m.gone) > m.maxBlocks {
		m.trim(u)
	}
}

func (m *Mapper) stored(e *Event, u *Update) {
	if e.BlockSize != m.configured && !e.Unkeyable {
		m.stats.OtherBlockSize.Add(1)
	}
	switch {
	case e.Unkeyable, e.LoRA, e.Extra, block.ValidateBlockSize(e.BlockSize) != nil:
		m.stats.Unkeyable.Add(1)
		return
	case e.BlockSize != m.blockSize:
		m.adopt(e.BlockSize, u)
	}
	prev := m.root
	if e.Parent != "" {
		p, ok := m.byHash[e.Parent]
		if !ok {
			m.stats.Orphans.Add(1)
			return
		}
		prev = p.key
	}
	tier := TierOf(e.Medium)
	m.chain.Resume(prev)
	for i, h := range e.Hashes {
		k := m.chain.Next(e.Tokens[i*m.blockSize : (i+1)*m.blockSize])
		old, ok := m.byHash[h]
		if ok && old.key != k {
			// The engine reused a hash for other tokens (a collision of
			// its hash, or a restart we did not see): the old block is gone.
			m.drop(h, old, u)
			ok = false
		}
		if ok && old.tiers.Has(tier) {
			continue
		}
		m.byHash[h] = mapped{key: k, tiers: old.tiers.With(tier)}
		r := m.refs[k]
		if r == nil {
			r = new([index.MaxTiers]int32)
			m.refs[k] = r
		}
		r[tier]++
		if r[tier] == 1 {
			u.Changes = append(u.Changes, Change{Key: k, Tiers: tiersOf(r)})
		}
	}
}

func (m *Mapper) removed(e *Event, u *Update) {
	tier := TierOf(e.Medium)
	for _, h := range e.Hashes {
		old, ok := m.byHash[h]
		if !ok || !old.tiers.Has(tier) {
			m.stats.UnknownRemoved.Add(1)
			continue
		}
		now := old.tiers.Without(tier)
		m.byHash[h] = mapped{key: old.key, tiers: now}
		if now == 0 {
			m.gone = append(m.gone, h)
		}
		m.release(old.key, tier, u)
	}
}

// adopt keys blocks of size bs from now on: the engine's events say its
// blocks are of that size, and keys of any other size would match no
// prompt keyed as the engine runs it. What was keyed at the old size is
// dropped (the view starts over).
func (m *Mapper) adopt(bs int, u *Update) {
	c, err := block.NewChain(m.namespace, bs)
	if err != nil {
		panic("BUG: kvevents: a validated block size does not chain: " + err.Error())
	}
	m.stats.BlockSizeChanges.Add(1)
	m.blockSize, m.chain, m.root = bs, c, block.Root(m.namespace, bs)
	if len(m.byHash) > 0 || len(m.gone) > 0 {
		m.Reset()
		u.Reset = true
		u.Changes = u.Changes[:0]
	}
}

// drop forgets hash h, held as e, entirely.
func (m *Mapper) drop(h Hash, e mapped, u *Update) {
	delete(m.byHash, h)
	for t := range index.MaxTiers {
		if e.tiers.Has(t) {
			m.release(e.key, t, u)
		}
	}
}

func (m *Mapper) release(k block.Key, tier int, u *Update) {
	r := m.refs[k]
	if r == nil || r[tier] == 0 {
		panic("BUG: kvevents: a mapped block without a reference")
	}
	r[tier]--
	if r[tier] > 0 {
		return
	}
	tiers := tiersOf(r)
	if tiers == 0 {
		delete(m.refs, k)
	}
	u.Changes = append(u.Changes, Change{Key: k, Tiers: tiers})
}

// trim forgets removed hashes, oldest first, until the Mapper is within
// its bound. If live blocks alone exceed it, the engine reported more
// blocks than it can hold (or removals were lost), and the only safe view
// is an empty one.
func (m *Mapper) trim(u *Update) {
	kept := m.gone[:0]
	seen := make(map[Hash]struct{}, len(m.gone))
	for _, h := range m.gone {
		e, ok := m.byHash[h]
		if !ok || e.tiers != 0 {
			continue // stored again since, or already forgotten
		}
		if _, dup := seen[h]; dup {
			continue
		}
		if len(m.byHash) > m.maxBlocks {
			delete(m.byHash, h)
			continue
		}
		seen[h] = struct{}{}
		kept = append(kept, h)
	}
	clear(m.gone[len(kept):])
	m.gone = kept
	if len(m.byHash) > m.maxBlocks {
		m.stats.Overflows.Add(1)
		m.Reset()
		u.Reset = true
		u.Changes = u.Changes[:0]
	}
}

func tiersOf(r *[index.MaxTiers]int32) index.TierMask {
	var t index.TierMask
	for i, n := range r {
		if n > 0 {
			t = t.With(i)
		}
	}
	return t
}
