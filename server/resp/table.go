package resp

import (
	"hash/maphash"
	"math/rand/v2"
)

// table is one name shard's index: an open-addressing hash table of
// entries by table key, with linear probing and deletion by backward
// shift (no tombstones). It replaces a map[string]*entry, whose slot holds
// the key's string header beside the pointer (24 bytes, at a load that
// halves on each doubling): here a slot is the pointer and a one-byte tag,
// 9 bytes, and the key is read from the entry itself (docs/resp.md,
// "Memory per key"). It is not safe for concurrent use; the shard's
// mutex guards it.
type table struct {
	seed maphash.Seed // keyspace.seed: the hash that chose the shard
	// tags[i] is 0 for an empty slot, else tagOf(hash) of slots[i]'s key:
	// most probes that are not a match end at the tag, without loading
	// the entry.
	tags  []uint8
	slots []*entry
	n     int
}

// maxLoad is the load past which the table doubles: probe sequences stay
// short at 7/8 with tags checked first, as Go's own maps allow.
const (
	maxLoadNum, maxLoadDen = 7, 8
	minTableSize           = 8
)

// tagOf is the tag of hash h: its top 7 bits with the high bit set, so
// that no tag is 0.
func tagOf(h uint64) uint8 { return uint8(h>>57) | 0x80 }

// home is the first slot of hash h. The low bits chose the shard
// (keyspace.shardOf), so the slot comes from the bits above them.
func (t *table) home(h uint64) int { return int(h>>8) & (len(t.slots) - 1) }

func (t *table) len() int { return t.n }

// get returns the entry of name in namespace ns, hashed h, or nil.
func (t *table) get(ns, name string, h uint64) *entry {
	if t.n == 0 {
		return nil
	}
	tag, mask := tagOf(h), len(t.slots)-1
	for i := t.home(h); ; i = (i + 1) & mask {
		switch t.tags[i] {
		case 0:
			return nil
		case tag:
			if e := t.slots[i]; e.name() == name && e.space.name == ns {
				return e
			}
		}
	}
}

// set makes e the entry of its key, hashed h, replacing any other.
func (t *table) set(e *entry, h uint64) {
	if (t.n+1)*maxLoadDen > len(t.slots)*maxLoadNum {
		t.grow()
	}
	tag, mask, ns, name := tagOf(h), len(t.slots)-1, e.space.name, e.name()
	for i := t.home(h); ; i = (i + 1) & mask {
		switch t.tags[i] {
		case 0:
			t.tags[i], t.slots[i] = tag, e
			t.n++
			return
		case tag:
			if o := t.slots[i]; o.name() == name && o.space.name == ns {
				t.slots[i] = e
				return
			}
		}
	}
}

// del removes the entry of name in ns, hashed h, if there is one, and
// shifts the entries of the probe run after it back, so lookups never
// cross a hole they should not.
func (t *table) del(ns, name string, h uint64) {
	if t.n == 0 {
		return
	}
	tag, mask := tagOf(h), len(t.slots)-1
	i := t.home(h)
	for ; ; i = (i + 1) & mask {
		if t.tags[i] == 0 {
			return
		}
		if e := t.slots[i]; t.tags[i] == tag && e.name() == name && e.space.name == ns {
			break
		}
	}
	// Backward shift: move each later entry of the run into the hole if
	// its home does not lie cyclically in (hole, its slot].
	hole := i
	for j := (i + 1) & mask; t.tags[j] != 0; j = (j + 1) & mask {
		home := t.home(hashEntry(t.seed, t.slots[j]))
		if (j-home)&mask >= (j-hole)&mask {
			t.tags[hole], t.slots[hole] = t.tags[j], t.slots[j]
			hole = j
		}
	}
	t.tags[hole], t.slots[hole] = 0, nil
	t.n--
	if t.n == 0 && len(t.slots) > minTableSize {
		*t = table{seed: t.seed} // an emptied shard gives its slots back
	}
}

// grow doubles the slots (or makes the first ones), rehashing every entry.
func (t *table) grow() {
	old := t.slots
	size := max(minTableSize, 2*len(old))
	t.tags, t.slots, t.n = make([]uint8, size), make([]*entry, size), 0
	for _, e := range old {
		if e != nil {
			t.set(e, hashEntry(t.seed, e))
		}
	}
}

// each calls fn for every entry, from a random slot on, until fn returns
// false: the random start is what makes a sample of the first few
// (sampleInline) random, as a Go map's iteration order is.
func (t *table) each(fn func(*entry) bool) {
	if t.n == 0 {
		return
	}
	start := rand.IntN(len(t.slots))
	for k := range len(t.slots) {
		if e := t.slots[(start+k)&(len(t.slots)-1)]; e != nil && !fn(e) {
			return
		}
	}
}
