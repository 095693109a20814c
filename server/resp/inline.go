package resp

import (
	"context"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// Inline values. A value of at most Options.InlineMax bytes is kept in its
// key's table entry, with its CRC-32C, instead of in a block of the store:
// a SET then costs a map update where a block costs a generation key
// (SHA-256), an allocation in the DRAM arena, a record, an index entry and
// the delete of the block it replaces. Such values are
//
//   - bounded: their keys, values and entries (entry.cost) together stay
//     within Options.InlineCapacity and within what they reserved of the
//     DRAM tier (share.go); past it a sample of inline keys is looked at
//     and the least recently used evicted (Redis's allkeys-lru
//     approximation), LMCache pair partners with them;
//   - verified: every read checks the CRC; a value that fails it is
//     dropped and read as missing;
//   - expired as any key (the deadline is in the entry);
//   - DRAM-only while the server runs: they are written as blocks, with
//     their records, when another node of a cluster reads one
//     (LocalName) and for all at Shutdown, so that Hierarchy.Flush keeps
//     them across a restart as it keeps DRAM blocks. A crash loses them,
//     as it loses values only in the DRAM tier.

// DefaultInlineMax is the default Options.InlineMax: values up to 1 KiB
// stay inline (docs/benchmarks.md, "Inline values", for the measurement).
const DefaultInlineMax = 1024

// entryOverhead is what an inline key costs beyond its key and value
// bytes: the entry, its slot in the table's map and the allocations'
// rounding (TestInlineMemory measures it).
const entryOverhead = 96

// cost is what e counts against Options.InlineCapacity.
func (e *entry) cost() int64 { return int64(e.klen+e.vlen) + entryOverhead }

// newInline returns the inline entry of a new value of name. val is
// copied.
func (c *conn) newInline(name, val []byte, expireAt int64) *entry {
	e := newEntryOf(c.sp, name, "", val, nil)
	e.gen = c.s.nextGen()
	e.crc = block.Checksum(val)
	if _, isPayload := partner(nil, c.sp, name); !isPayload && c.payloadStored(c.sp, name) {
		e.paired = true
	}
	e.expireAt.Store(expireAt)
	e.used.Store(c.s.tick.Load())
	return e
}

// inlineOK reports whether a value of n bytes is kept inline.
func (s *Server) inlineOK(n int) bool { return n <= s.opts.InlineMax }

// present reports whether e's value is in this node's store: an inline
// value is wherever its entry is; a block must still be in the store's
// index, which it leaves on eviction before OnDrop runs.
func (s *Server) present(e *entry) bool {
	return e.inline || s.store.Contains(e.bkey())
}

// pin returns a handle on e's value: the store's pinned view of its
// block, or for an inline value the entry's bytes once their checksum
// holds. A corrupt inline value is dropped and read as ErrNotFound (a
// wrapped tier.ErrCorrupt).
func (s *Server) pin(ctx context.Context, e *entry) (*tier.Handle, error) {
	if !e.inline {
		h, _, err := s.store.Get(ctx, e.bkey())
		return h, err
	}
	if block.Checksum(e.val()) != e.crc {
		s.stats.corrupt.Add(1)
		s.opts.Logger.Warn("resp: an inline value failed its checksum; dropped", "key", e.name())
		if s.ks.swap(e, nil) {
			s.freeValue(e)
		}
		return nil, tier.ErrCorrupt
	}
	e.used.Store(s.tick.Load())
	return tier.NewHandle(e.val(), e.crc, nil), nil
}

// freeValue gives back the value of e, which has just left the table:
// its block, or for an inline value the block it was written to, if any.
func (s *Server) freeValue(e *entry) {
	if k, ok := valueBlock(e); ok {
		s.store.Delete(k)
	}
}

// valueBlock is the block holding e's value, if there is one.
func valueBlock(e *entry) (block.Key, bool) {
	if !e.inline {
		return e.bkey(), true
	}
	if e.mat.Load() {
		return blockKey(e.space.name, []byte(e.name()), e.gen), true
	}
	return block.Key{}, false
}

// materialize writes inline e as a block with its record, as a block
// value of its generation would have been, and returns the block's key:
// another node reads it by that key, and Hierarchy.Flush keeps it across
// a restart. If e leaves the table meanwhile, the block is deleted.
func (s *Server) materialize(e *entry) (block.Key, error) {
	name := []byte(e.name())
	k := blockKey(e.space.name, name, e.gen)
	if e.mat.Load() {
		return k, nil
	}
	rec := record{gen: e.gen, expireAt: e.expireAt.Load(), ns: e.space.name, name: e.name()}
	if e.paired {
		rec.flags |= flagPaired
	}
	meta := rec.appendTo(make([]byte, 0, recordLen(e.space.name, len(name))))
	if _, err := s.store.Put(s.ctx, k, e.val(), tier.PutOptions{Meta: meta, Checksum: e.crc, HasChecksum: true}); err != nil {
		return block.Key{}, err
	}
	// Set, then check: freeValue, run after the entry left the table,
	// either sees mat and deletes the block, or ran before mat was set,
	// and then e is no longer current here.
	e.mat.Store(true)
	if !s.ks.current(e) {
		s.store.Delete(k)
		return block.Key{}, tier.ErrNotFound
	}
	return k, nil
}

// persistInline writes every inline value as a block (materialize), so
// that the store's Flush keeps them across a restart, until ctx ends:
// those left are lost at the restart, as a cache may lose them. Shutdown
// calls it once no command runs.
func (s *Server) persistInline(ctx context.Context) (written int) {
	var es []*entry
	s.ks.each(nil, func(e *entry) bool {
		if e.inline && !e.mat.Load() {
			es = append(es, e)
		}
		return true
	})
	for i, e := range es {
		if i%1024 == 0 && ctx.Err() != nil {
			s.opts.Logger.Warn("resp: shutdown ended before every inline value was written to the store; the rest are lost at restart",
				"written", written, "left", len(es)-i)
			return written
		}
		if _, err := s.materialize(e); err == nil {
			written++
		}
	}
	return written
}

// evictSample is how many inline keys eviction looks at to choose one, as
// Redis's maxmemory-samples (5) does; 8 comes closer to true LRU for the
// price of a few more map steps.
const evictSample = 8

// evictInline evicts inline keys until their cost is within target: of a
// sample from one shard after another, the least recently used, with its
// LMCache pair partner.
func (s *Server) evictInline(target int64) {
	for tries := 0; s.ks.inlineBytes.Load() > target && tries < 4*shards; tries++ {
		e := s.ks.sampleInline(int(s.evictShard.Add(1) % shards))
		if e == nil {
			continue
		}
		s.evict(e)
	}
}

// evict removes e as the store's eviction removes a block's key: with its
// LMCache pair partner.
func (s *Server) evict(e *entry) {
	if s.ks.swap(e, nil) {
		s.freeValue(e)
		s.stats.evicted.Add(1)
		s.dropPartner(e)
	}
}

// sampleInline returns the least recently used of up to evictSample
// inline entries of shard i (table.each starts at a random slot), or
// nil if it holds none.
func (ks *keyspace) sampleInline(i int) *entry {
	s := &ks.names[i]
	s.RLock()
	defer s.RUnlock()
	var best *entry
	seen, looked := 0, 0
	s.t.each(func(e *entry) bool {
		if looked++; looked > 8*evictSample {
			return false
		}
		if !e.inline {
			return true
		}
		if best == nil || int32(e.used.Load()-best.used.Load()) < 0 {
			best = e
		}
		seen++
		return seen < evictSample
	})
	return best
}
