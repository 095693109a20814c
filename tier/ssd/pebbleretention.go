package ssd

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/policy"
)

// Retention classes in the pebble-values layout (docs/retention.md). A
// block of a class other than normal, or with an end, has a class record
// beside its value, written in the same batch as the value and deleted
// with it:
//
//	'c' || key  ->  class u8 || end i64 little-endian (Unix ns, 0: none)
//
// Normal blocks have none, so a store written before classes reads as
// before. A class change rewrites only the record, not the value.
const (
	prefixClass  = 'c'
	classRecSize = 9
)

func classKey(k block.Key) []byte {
	b := make([]byte, 1+block.KeySize)
	b[0] = prefixClass
	copy(b[1:], k[:])
	return b
}

func encodeClass(c retention) []byte {
	b := make([]byte, classRecSize)
	b[0] = byte(c.r)
	binary.LittleEndian.PutUint64(b[1:], uint64(c.until))
	return b
}

// decodeClass reads a class record; one that is not a known class with a
// non-negative end reads as false, and the block is normal.
func decodeClass(v []byte) (retention, bool) {
	if len(v) != classRecSize {
		return retention{}, false
	}
	c := retention{tier.Retention(v[0]), int64(binary.LittleEndian.Uint64(v[1:]))}
	if !c.r.Valid() || c.until < 0 {
		return retention{}, false
	}
	return c, true
}

// normal reports whether c needs no class record.
func (c retention) normal() bool { return c.r == tier.RetentionNormal && c.until == 0 }

// addClass adds to b what key's class record must become.
func addClass(b *pebble.Batch, key block.Key, c retention) {
	if c.normal() {
		// A record left by an earlier block of this key must not
		// give this one its class at the next open.
		b.Delete(classKey(key), nil)
		return
	}
	b.Set(classKey(key), encodeClass(c), nil)
}

// writeValue stores a block's value and its class record in one batch, so
// a crash never leaves a value with another block's class.
func (p *PebbleStore) writeValue(key block.Key, rec []byte, c retention, wo *pebble.WriteOptions) error {
	b := p.db.NewBatch()
	b.Set(valueKey(key), rec, nil)
	addClass(b, key, c)
	return commitBatch(b, wo)
}

// deleteValue deletes a block's value and class record.
func (p *PebbleStore) deleteValue(key block.Key) error {
	b := p.db.NewBatch()
	b.Delete(valueKey(key), nil)
	b.Delete(classKey(key), nil)
	return commitBatch(b, pebble.NoSync)
}

// readClasses reads every class record at open.
func (p *PebbleStore) readClasses() (map[block.Key]retention, error) {
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixClass}, UpperBound: []byte{prefixClass + 1}})
	if err != nil {
		return nil, fmt.Errorf("ssd: reading classes: %w", err)
	}
	out := make(map[block.Key]retention)
	for it.First(); it.Valid(); it.Next() {
		if len(it.Key()) != 1+block.KeySize {
			continue
		}
		var k block.Key
		copy(k[:], it.Key()[1:])
		if c, ok := decodeClass(it.Value()); ok {
			out[k] = c
		} else {
			out[k] = retention{} // dropped as an orphan if no value claims it
		}
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("ssd: reading classes: %w", err)
	}
	return out, nil
}

// dropOrphanClasses deletes class records no value claimed (a class change
// that raced a delete): best effort, as they are ignored anyway.
func (p *PebbleStore) dropOrphanClasses(orphans map[block.Key]retention) {
	if len(orphans) == 0 {
		return
	}
	b := p.db.NewBatch()
	for k := range orphans {
		b.Delete(classKey(k), nil)
	}
	if err := p.dbWrite(func() error { return commitBatch(b, pebble.NoSync) }); err != nil {
		p.opts.Logger.Warn("ssd: deleting orphan class records", "err", err)
	}
}

// startClassLocked gives an entry its class: one already lapsed is
// Normal, one with an end is queued to lapse.
func (p *PebbleStore) startClassLocked(key block.Key, e *pentry, r tier.Retention, until int64) {
	r, until = tier.Settle(r, until, p.opts.Now().UnixNano())
	e.retention, e.retainUntil = r, until
	if until != 0 {
		p.mu.retains.Push(until, key)
	}
}

// placeLocked puts a committed block eviction may take into its class's
// queue. Soft-pinned and hard-pinned blocks stay out, so no victim search
// walks them.
func (p *PebbleStore) placeLocked(key block.Key, e *pentry, info policy.Info[block.Key]) {
	if e.inPolicy || e.pinnedUntil != 0 {
		return
	}
	rank := e.retention.Rank()
	if rank >= tier.NumRanks {
		return
	}
	info.Class = rank
	p.mu.policy.Add(key, info)
	e.inPolicy = true
}

// setClassLocked changes an entry's class and moves it to that class's
// queue, at the back: a class change is about the block's future, not a
// hit.
func (p *PebbleStore) setClassLocked(key block.Key, e *pentry, r tier.Retention, until int64) {
	p.startClassLocked(key, e, r, until)
	if e.inPolicy {
		p.mu.policy.Remove(key)
		e.inPolicy = false
	}
	p.placeLocked(key, e, policy.Info[block.Key]{Size: e.size})
}

// expireRetainsLocked moves blocks whose class ended to Normal. Their
// records keep the old class with its end, which the next open reads as
// lapsed.
func (p *PebbleStore) expireRetainsLocked() {
	p.mu.retains.Expire(p.opts.Now().UnixNano(), func(k block.Key, until int64) {
		if e := p.mu.blocks[k]; e != nil && e.retainUntil == until {
			p.setClassLocked(k, e, tier.RetentionNormal, 0)
		}
	})
}

// SetRetention implements tier.Retainer: the class record is rewritten,
// the value is not.
func (p *PebbleStore) SetRetention(key block.Key, r tier.Retention, until time.Time) error {
	if !r.Valid() {
		return fmt.Errorf("ssd: %w: %v", tier.ErrRetention, r)
	}
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return tier.ErrClosed
	}
	e, ok := p.mu.blocks[key]
	if !ok || !e.committed {
		p.mu.Unlock()
		return tier.ErrNotFound
	}
	p.setClassLocked(key, e, r, tier.UnixNanos(until))
	c := retention{e.retention, e.retainUntil}
	p.mu.Unlock()
	err := p.dbWrite(func() error {
		b := p.db.NewBatch()
		addClass(b, key, c)
		return commitBatch(b, pebble.NoSync)
	})
	if err != nil {
		return fmt.Errorf("%w: ssd: writing %s's class: %w", tier.ErrUnavailable, key, err)
	}
	return nil
}
