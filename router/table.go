package router

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"

	"github.com/yuebing/yuebing/block"
)

// blockTable maps block keys to what an engine holds of them: an
// open-addressing table with linear probing, kept at most half full. A
// decision looks up every key of its prompt on the engine that holds it
// and renews each in place; a Go map hashes and compares 32-byte keys
// generically and needs a second lookup to store, which made the maps
// most of a decision's CPU time. Keys compare as four words inline.
type blockTable struct {
	slots []blockSlot
	mask  uint64
	n     int
	seed  [2]uint64
	// The zero key marks empty slots, so it lives apart.
	zero    held
	hasZero bool
}

type blockSlot struct {
	w keyWords
	h held
}

type keyWords [4]uint64

func (w *keyWords) zero() bool { return w[0]|w[1]|w[2]|w[3] == 0 }

func wordsOf(k *block.Key) keyWords {
	return keyWords{
		binary.LittleEndian.Uint64(k[0:]), binary.LittleEndian.Uint64(k[8:]),
		binary.LittleEndian.Uint64(k[16:]), binary.LittleEndian.Uint64(k[24:]),
	}
}

func newBlockTable() *blockTable {
	t := &blockTable{seed: [2]uint64{rand.Uint64(), rand.Uint64()}}
	t.resize(64)
	return t
}

// hash mixes all of the key with a per-table secret seed: prompts come
// from clients, and keys that collided on purpose would turn lookups into
// scans.
func (t *blockTable) hash(w *keyWords) uint64 {
	return mix(w[0]^t.seed[0], w[1]^0x9e3779b97f4a7c15) ^ mix(w[2]^t.seed[1], w[3]^0xbf58476d1ce4e5b9)
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// len returns the number of keys held.
func (t *blockTable) len() int {
	if t.hasZero {
		return t.n + 1
	}
	return t.n
}

// find returns k's entry, nil when absent. The pointer is good until the
// table next changes size (an insert) or deletes.
func (t *blockTable) find(k *block.Key) *held {
	w := wordsOf(k)
	if w.zero() {
		if t.hasZero {
			return &t.zero
		}
		return nil
	}
	for i := t.hash(&w) & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.w == w {
			return &s.h
		}
		if s.w.zero() {
			return nil
		}
	}
}

// upsert returns k's entry, inserting a zero one (and reporting true) when
// absent; the caller fills it in or removes it. The pointer is good until
// the next upsert or remove.
func (t *blockTable) upsert(k *block.Key) (*held, bool) {
	w := wordsOf(k)
	if w.zero() {
		isNew := !t.hasZero
		t.hasZero = true
		return &t.zero, isNew
	}
	if 2*(t.n+1) > len(t.slots) {
		t.resize(2 * len(t.slots))
	}
	i := t.hash(&w) & t.mask
	for ; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.w == w {
			return &s.h, false
		}
		if s.w.zero() {
			break
		}
	}
	t.slots[i] = blockSlot{w: w}
	t.n++
	return &t.slots[i].h, true
}

// remove deletes k if present.
func (t *blockTable) remove(k *block.Key) {
	w := wordsOf(k)
	if w.zero() {
		t.zero, t.hasZero = held{}, false
		return
	}
	for i := t.hash(&w) & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.w == w {
			t.deleteAt(i)
			return
		}
		if s.w.zero() {
			return
		}
	}
}

// deleteAt empties slot i and shifts later members of its probe run back,
// so lookups never need tombstones.
func (t *blockTable) deleteAt(i uint64) {
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
	t.slots[i] = blockSlot{}
}

// filter applies f to every entry, which it may change, and deletes those
// it returns false for. It is a pass over the whole table: for resets, not
// for the request path.
func (t *blockTable) filter(f func(*held) bool) {
	for next := 0; ; {
		if next = t.filterSome(next, len(t.slots), f); next == 0 {
			return
		}
	}
}

// filterSome is filter over at most n slots from slot start (the zero key
// with start 0), and returns the slot to go on from, 0 after the last.
// Between calls the table may change: a pass then sees some entries twice
// or misses some, which f must allow (the callers' changes are idempotent,
// and a missed entry waits for the next pass).
func (t *blockTable) filterSome(start, n int, f func(*held) bool) int {
	if start == 0 && t.hasZero && !f(&t.zero) {
		t.zero, t.hasZero = held{}, false
	}
	end := uint64(min(start+n, len(t.slots)))
	// A deletion shifts later members of the run back, possibly into slot
	// i, so i is looked at again; members that wrap past the end to the
	// table's start may move back past its end and be seen twice.
	i := uint64(start)
	for i < end {
		s := &t.slots[i]
		if !s.w.zero() && !f(&s.h) {
			t.deleteAt(i)
			continue
		}
		i++
	}
	if i >= uint64(len(t.slots)) {
		return 0
	}
	return int(i)
}

func (t *blockTable) resize(n int) {
	old := t.slots
	t.slots = make([]blockSlot, n)
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
