package scheduler

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"

	"github.com/yuebing/yuebing/block"
)

// keySets maps block keys to instance sets: an open-addressing table with
// linear probing whose slot (key and set) is one 64-byte cache line. It is
// the hot structure of every decision (one lookup per key of a prompt), and
// a custom table does that lookup in about half the time of a Go map, which
// hashes and compares 32-byte keys generically and keeps control bytes
// apart from the slots. The table stays at most half full, so a lookup
// touches 1.5 slots on average; that costs 128 bytes per key.
type keySets struct {
	slots []keySlot
	mask  uint64
	n     int
	seed  [2]uint64
	// The zero key marks empty slots, so it lives apart.
	zero    instSet
	hasZero bool
}

// keySlot holds the key as words: comparing four words inline is several
// times faster than the generic 32-byte comparison of block.Key values.
type keySlot struct {
	w   keyWords
	set instSet
}

type keyWords [4]uint64

func (w *keyWords) zero() bool { return w[0]|w[1]|w[2]|w[3] == 0 }

func wordsOf(k *block.Key) keyWords {
	return keyWords{
		binary.LittleEndian.Uint64(k[0:]), binary.LittleEndian.Uint64(k[8:]),
		binary.LittleEndian.Uint64(k[16:]), binary.LittleEndian.Uint64(k[24:]),
	}
}

func newKeySets() *keySets {
	t := &keySets{seed: [2]uint64{rand.Uint64(), rand.Uint64()}}
	t.resize(64)
	return t
}

// hash mixes all of the key with a per-table secret seed: keys arrive over
// the API, and a client that could make keys collide would turn lookups
// into scans (the index package does the same).
func (t *keySets) hash(w *keyWords) uint64 {
	return mix(w[0]^t.seed[0], w[1]^0x9e3779b97f4a7c15) ^ mix(w[2]^t.seed[1], w[3]^0xbf58476d1ce4e5b9)
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// get returns k's set (empty when absent).
func (t *keySets) get(k *block.Key) instSet {
	w := wordsOf(k)
	if w.zero() {
		return t.zero
	}
	for i := t.hash(&w) & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.w == w {
			return s.set
		}
		if s.w.zero() {
			return instSet{}
		}
	}
}

// put sets k's set; an empty set deletes k.
func (t *keySets) put(k *block.Key, set instSet) {
	w := wordsOf(k)
	if w.zero() {
		t.zero, t.hasZero = set, !set.empty()
		return
	}
	i := t.hash(&w) & t.mask
	for ; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.w == w {
			if set.empty() {
				t.deleteAt(i)
			} else {
				s.set = set
			}
			return
		}
		if s.w.zero() {
			break
		}
	}
	if set.empty() {
		return
	}
	t.slots[i] = keySlot{w: w, set: set}
	t.n++
	if 2*t.n > len(t.slots) {
		t.resize(2 * len(t.slots))
	}
}

// deleteAt empties slot i and shifts later members of its probe run back,
// so lookups never need tombstones.
func (t *keySets) deleteAt(i uint64) {
	t.n--
	for j := (i + 1) & t.mask; ; j = (j + 1) & t.mask {
		s := &t.slots[j]
		if s.w.zero() {
			break
		}
		home := t.hash(&s.w) & t.mask
		// s may move to i if i lies on its probe path from home to j.
		if (j-home)&t.mask >= (j-i)&t.mask {
			t.slots[i] = *s
			i = j
		}
	}
	t.slots[i] = keySlot{}
}

func (t *keySets) resize(n int) {
	old := t.slots
	t.slots = make([]keySlot, n)
	t.mask = uint64(n - 1)
	for i := range old {
		s := &old[i]
		if s.w.zero() {
			continue
		}
		j := t.hash(&s.w) & t.mask
		for !t.slots[j].w.zero() {
			j = (j + 1) & t.mask
		}
		t.slots[j] = *s
	}
}

// len returns the number of keys held by any instance.
func (t *keySets) len() int {
	if t.hasZero {
		return t.n + 1
	}
	return t.n
}

// update applies f to every key's set (the zero key's too), deleting keys
// whose set becomes empty. It rebuilds the table: it is for rare, global
// changes (an instance leaving).
func (t *keySets) update(f func(*instSet)) {
	if t.hasZero {
		f(&t.zero)
		t.hasZero = !t.zero.empty()
	}
	old := t.slots
	t.slots = make([]keySlot, len(old))
	t.n = 0
	for i := range old {
		s := &old[i]
		if s.w.zero() {
			continue
		}
		f(&s.set)
		if s.set.empty() {
			continue
		}
		j := t.hash(&s.w) & t.mask
		for !t.slots[j].w.zero() {
			j = (j + 1) & t.mask
		}
		t.slots[j] = *s
		t.n++
	}
}
