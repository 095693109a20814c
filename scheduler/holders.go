package scheduler

import (
	"math/bits"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// instSet is a set of instance slots.
type instSet [MaxInstances / 64]uint64

func (s *instSet) add(i int)         { s[i>>6] |= 1 << (i & 63) }
func (s *instSet) remove(i int)      { s[i>>6] &^= 1 << (i & 63) }
func (s *instSet) has(i int) bool    { return s[i>>6]&(1<<(i&63)) != 0 }
func (s *instSet) empty() bool       { return s[0]|s[1]|s[2]|s[3] == 0 }
func (s *instSet) and(o *instSet)    { s[0] &= o[0]; s[1] &= o[1]; s[2] &= o[2]; s[3] &= o[3] }
func (s *instSet) andNot(o *instSet) { s[0] &^= o[0]; s[1] &^= o[1]; s[2] &^= o[2]; s[3] &^= o[3] }
func (s *instSet) forEach(f func(int)) {
	for w, word := range s {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			f(w<<6 | b)
			word &= word - 1
		}
	}
}

// forEachFrom is forEach starting at slot start and wrapping around, so the
// first of equals changes as start does.
func (s *instSet) forEachFrom(start int, f func(int)) {
	s.forEach(func(i int) {
		if i >= start {
			f(i)
		}
	})
	s.forEach(func(i int) {
		if i < start {
			f(i)
		}
	})
}

// holders maps each block key to the set of instances that hold it. One
// lookup per chain key yields every instance's membership at once, so
// matching a prompt against all instances is a single pass over its chain
// that stops at the first key no candidate holds (see match). The
// alternative, a roaring bitmap of interned ids per instance, costs the
// same interning lookup per key plus one Contains per instance and key;
// BenchmarkPrefixMatch measures both.
type holders struct {
	m *keySets
	// tiers records, for the few blocks an instance reports outside its
	// fastest tier, where they are; absent means tier 0 (DRAM).
	tiers map[tierRef]index.TierMask
	// count[i] is how many blocks instance slot i holds.
	count [MaxInstances]int64
}

type tierRef struct {
	key  block.Key
	slot uint8
}

func newHolders() *holders {
	return &holders{m: newKeySets(), tiers: make(map[tierRef]index.TierMask)}
}

// add records that slot holds k, in tiers (0 means tier 0 only).
func (h *holders) add(slot int, k block.Key, tiers index.TierMask) {
	s := h.m.get(&k)
	if !s.has(slot) {
		s.add(slot)
		h.m.put(&k, s)
		h.count[slot]++
	}
	ref := tierRef{k, uint8(slot)}
	if tiers == 0 || tiers == 1 {
		delete(h.tiers, ref)
	} else {
		h.tiers[ref] = tiers
	}
}

// remove records that slot no longer holds k.
func (h *holders) remove(slot int, k block.Key) {
	s := h.m.get(&k)
	if !s.has(slot) {
		return
	}
	s.remove(slot)
	h.m.put(&k, s)
	h.count[slot]--
	delete(h.tiers, tierRef{k, uint8(slot)})
}

// drop forgets everything slot holds (the instance left). It scans every
// key: unregistering is rare, matching is not, so the cost goes here.
func (h *holders) drop(slot int) {
	if h.count[slot] == 0 {
		return
	}
	h.m.update(func(s *instSet) { s.remove(slot) })
	for ref := range h.tiers {
		if int(ref.slot) == slot {
			delete(h.tiers, ref)
		}
	}
	h.count[slot] = 0
}

// match sets lens[i] to the number of leading keys of chain that slot i
// holds, for every slot in cands (other slots are left alone), in one pass
// that ends when no candidate holds the next key.
func (h *holders) match(chain []block.Key, cands instSet, lens *[MaxInstances]int) {
	alive := cands
	for i := range chain {
		s := h.m.get(&chain[i])
		gone := alive
		gone.andNot(&s)
		if !gone.empty() {
			gone.forEach(func(slot int) { lens[slot] = i })
			alive.and(&s)
			if alive.empty() {
				return
			}
		}
	}
	alive.forEach(func(slot int) { lens[slot] = len(chain) })
}

// tierOf returns the tiers slot holds k in (tier 0 unless reported).
func (h *holders) tierOf(slot int, k block.Key) index.TierMask {
	if t, ok := h.tiers[tierRef{k, uint8(slot)}]; ok {
		return t
	}
	return 1
}
