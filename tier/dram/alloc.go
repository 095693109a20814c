package dram

import (
	"fmt"
	"math/bits"
)

// allocator hands out variable-size spans of an arena with the TLSF (two-level
// segregated fit) scheme: free spans sit in lists by size class, two levels of
// bitmaps find a non-empty class in O(1), spans are split on allocation and
// merged with free neighbours on free. Its bookkeeping lives on the Go heap,
// not in the arena, so a stray write into block bytes can never corrupt it.
//
// Sizes and offsets are in granules (granuleSize bytes). The allocator is not
// safe for concurrent use; the tier's mutex guards it.
type allocator struct {
	spans    []span
	freeIDs  []int32 // unused span records
	flBitmap uint64
	slBitmap [flCount]uint32
	heads    [flCount][slCount]int32
	total    int64 // granules in the arena
	free     int64 // granules in free spans
}

const (
	granuleShift = 6 // 64-byte granules: a cache line, so blocks never share one
	granuleSize  = 1 << granuleShift
	slBits       = 4 // 16 classes per power of two: at most ~6% slack per span
	slCount      = 1 << slBits
	flCount      = 64
	nilSpan      = int32(-1)
)

type span struct {
	off, size          int64 // granules
	prevPhys, nextPhys int32 // physical neighbours, nilSpan at the ends
	prevFree, nextFree int32 // free-list links, valid while free
	free               bool
	used               bool // the record is in use (not on freeIDs)
}

func newAllocator(granules int64) *allocator {
	a := &allocator{total: granules}
	for i := range a.heads {
		for j := range a.heads[i] {
			a.heads[i][j] = nilSpan
		}
	}
	if granules > 0 {
		id := a.newSpan(span{off: 0, size: granules, prevPhys: nilSpan, nextPhys: nilSpan})
		a.insertFree(id)
	}
	return a
}

// mapping returns the size class of size granules.
func mapping(size int64) (fl, sl int) {
	if size < slCount {
		return 0, int(size)
	}
	fl = bits.Len64(uint64(size)) - 1
	sl = int(size>>(uint(fl)-slBits)) & (slCount - 1)
	return fl - slBits + 1, sl
}

func (a *allocator) newSpan(s span) int32 {
	s.used = true
	if n := len(a.freeIDs); n > 0 {
		id := a.freeIDs[n-1]
		a.freeIDs = a.freeIDs[:n-1]
		a.spans[id] = s
		return id
	}
	a.spans = append(a.spans, s)
	return int32(len(a.spans) - 1)
}

func (a *allocator) dropSpan(id int32) {
	a.spans[id] = span{}
	a.freeIDs = append(a.freeIDs, id)
}

func (a *allocator) insertFree(id int32) {
	s := &a.spans[id]
	fl, sl := mapping(s.size)
	s.free = true
	s.prevFree, s.nextFree = nilSpan, a.heads[fl][sl]
	if s.nextFree != nilSpan {
		a.spans[s.nextFree].prevFree = id
	}
	a.heads[fl][sl] = id
	a.flBitmap |= 1 << uint(fl)
	a.slBitmap[fl] |= 1 << uint(sl)
	a.free += s.size
}

func (a *allocator) removeFree(id int32) {
	s := &a.spans[id]
	fl, sl := mapping(s.size)
	if s.prevFree != nilSpan {
		a.spans[s.prevFree].nextFree = s.nextFree
	} else {
		a.heads[fl][sl] = s.nextFree
	}
	if s.nextFree != nilSpan {
		a.spans[s.nextFree].prevFree = s.prevFree
	}
	if a.heads[fl][sl] == nilSpan {
		a.slBitmap[fl] &^= 1 << uint(sl)
		if a.slBitmap[fl] == 0 {
			a.flBitmap &^= 1 << uint(fl)
		}
	}
	s.free = false
	a.free -= s.size
}

// findFree returns a free span of at least size granules, or nilSpan.
func (a *allocator) findFree(size int64) int32 {
	// Round the request up to the next class boundary: every span in the
	// class found then fits, which is what makes the search O(1).
	search := size
	if size >= slCount {
		search += 1<<(uint(bits.Len64(uint64(size))-1)-slBits) - 1
	}
	fl, sl := mapping(search)
	if fl < flCount {
		if m := a.slBitmap[fl] & (^uint32(0) << uint(sl)); m != 0 {
			return a.heads[fl][bits.TrailingZeros32(m)]
		}
		if m := a.flBitmap & (^uint64(0) << uint(fl+1)); m != 0 {
			f := bits.TrailingZeros64(m)
			return a.heads[f][bits.TrailingZeros32(a.slBitmap[f])]
		}
	}
	// Rounding up skipped the request's own class, whose spans may still fit:
	// scan it before reporting failure, so the arena is never "full" while a
	// span that fits is free.
	fl, sl = mapping(size)
	for id := a.heads[fl][sl]; id != nilSpan; id = a.spans[id].nextFree {
		if a.spans[id].size >= size {
			return id
		}
	}
	return nilSpan
}

// alloc returns a span of size granules (size > 0), or nilSpan when no free
// span is large enough.
func (a *allocator) alloc(size int64) int32 {
	if size <= 0 {
		panic(fmt.Sprintf("BUG: dram: alloc of %d granules", size))
	}
	id := a.findFree(size)
	if id == nilSpan {
		return nilSpan
	}
	a.removeFree(id)
	if rest := a.spans[id].size - size; rest > 0 {
		s := &a.spans[id]
		tail := a.newSpan(span{off: s.off + size, size: rest, prevPhys: id, nextPhys: s.nextPhys})
		s = &a.spans[id] // newSpan may have moved the slice
		if s.nextPhys != nilSpan {
			a.spans[s.nextPhys].prevPhys = tail
		}
		s.nextPhys = tail
		s.size = size
		a.insertFree(tail)
	}
	return id
}

// release frees span id and merges it with free neighbours.
func (a *allocator) release(id int32) {
	s := &a.spans[id]
	if !s.used || s.free {
		panic(fmt.Sprintf("BUG: dram: release of span %d (used=%v free=%v)", id, s.used, s.free))
	}
	if n := s.nextPhys; n != nilSpan && a.spans[n].free {
		a.removeFree(n)
		a.absorbNext(id, n)
	}
	if p := a.spans[id].prevPhys; p != nilSpan && a.spans[p].free {
		a.removeFree(p)
		a.absorbNext(p, id)
		id = p
	}
	a.insertFree(id)
}

// absorbNext merges span n into its physical predecessor id.
func (a *allocator) absorbNext(id, n int32) {
	s, ns := &a.spans[id], a.spans[n]
	s.size += ns.size
	s.nextPhys = ns.nextPhys
	if ns.nextPhys != nilSpan {
		a.spans[ns.nextPhys].prevPhys = id
	}
	a.dropSpan(n)
}

// largestFree returns the size of the largest free span, in granules. It is
// O(1) in the class lookup and linear only in the top class's list.
func (a *allocator) largestFree() int64 {
	if a.flBitmap == 0 {
		return 0
	}
	fl := 63 - bits.LeadingZeros64(a.flBitmap)
	sl := 31 - bits.LeadingZeros32(a.slBitmap[fl])
	var best int64
	for id := a.heads[fl][sl]; id != nilSpan; id = a.spans[id].nextFree {
		best = max(best, a.spans[id].size)
	}
	return best
}

func granules(bytes int64) int64 { return (bytes + granuleSize - 1) >> granuleShift }
