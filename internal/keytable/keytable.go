package keytable

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"

	"github.com/yuebing/yuebing/block"
)

// Table maps block keys to values of type V. The zero Table is not ready
// for use: make one with New.
type Table[V any] struct {
	slots []slot[V]
	mask  uint64
	n     int
	seed  [2]uint64
	// The zero key marks empty slots, so it lives apart.
	zero    V
	hasZero bool
}

type slot[V any] struct {
	w words
	v V
}

// words is a key as four words: comparing them inline is several times
// faster than the generic comparison of two 32-byte arrays.
type words [4]uint64

func (w *words) zero() bool { return w[0]|w[1]|w[2]|w[3] == 0 }

func wordsOf(k *block.Key) words {
	return words{
		binary.LittleEndian.Uint64(k[0:]), binary.LittleEndian.Uint64(k[8:]),
		binary.LittleEndian.Uint64(k[16:]), binary.LittleEndian.Uint64(k[24:]),
	}
}

// New returns an empty table.
func New[V any]() *Table[V] {
	t := &Table[V]{seed: [2]uint64{rand.Uint64(), rand.Uint64()}}
	t.resize(64)
	return t
}

func (t *Table[V]) hash(w *words) uint64 {
	return mix(w[0]^t.seed[0], w[1]^0x9e3779b97f4a7c15) ^ mix(w[2]^t.seed[1], w[3]^0xbf58476d1ce4e5b9)
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// Len returns the number of keys in the table.
func (t *Table[V]) Len() int {
	if t.hasZero {
		return t.n + 1
	}
	return t.n
}

// Find returns k's value, nil when absent. The pointer is good until the
// table next grows (an Upsert) or deletes (Remove, Filter).
func (t *Table[V]) Find(k *block.Key) *V {
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
			return &s.v
		}
		if s.w.zero() {
			return nil
		}
	}
}

// Upsert returns k's value, inserting a zero one (and reporting true) when
// absent; the caller fills it in, or removes it. The pointer is good until
// the next Upsert or deletion.
func (t *Table[V]) Upsert(k *block.Key) (*V, bool) {
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
			return &s.v, false
		}
		if s.w.zero() {
			break
		}
	}
	t.slots[i] = slot[V]{w: w}
	t.n++
	return &t.slots[i].v, true
}

// Remove deletes k if present.
func (t *Table[V]) Remove(k *block.Key) {
	w := wordsOf(k)
	if w.zero() {
		var zero V
		t.zero, t.hasZero = zero, false
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
func (t *Table[V]) deleteAt(i uint64) {
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
	t.slots[i] = slot[V]{}
}

// Filter applies f to every value, which f may change, and deletes the
// keys it returns false for. It is a pass over the whole table: for resets
// and global changes, not for a request path.
func (t *Table[V]) Filter(f func(*V) bool) {
	for next := 0; ; {
		if next = t.FilterSome(next, len(t.slots), f); next == 0 {
			return
		}
	}
}

// FilterSome is Filter over at most n slots from slot start (the zero key
// with start 0), and returns the slot to go on from, 0 after the last.
// Between calls the table may change: a pass then sees some values twice
// or misses some, which f must allow (a change that is idempotent, and a
// missed value waits for the next pass).
func (t *Table[V]) FilterSome(start, n int, f func(*V) bool) int {
	if start == 0 && t.hasZero && !f(&t.zero) {
		var zero V
		t.zero, t.hasZero = zero, false
	}
	end := uint64(min(start+n, len(t.slots)))
	// A deletion shifts later members of the run back, possibly into slot
	// i, so i is looked at again; members that wrap past the end to the
	// table's start may move back past its end and be seen twice.
	i := uint64(start)
	for i < end {
		s := &t.slots[i]
		if !s.w.zero() && !f(&s.v) {
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

func (t *Table[V]) resize(n int) {
	old := t.slots
	t.slots = make([]slot[V], n)
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
