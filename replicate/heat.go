package replicate

import (
	"encoding/binary"
	"math/bits"

	"github.com/yuebing/yuebing/block"
)

// Heat is counted in two places. Every hit goes to a count-min sketch, a
// fixed 512 KiB whatever the number of blocks; only a block whose estimate
// reaches Options.TrackFloor gets a window of its own (the exact hits per
// bucket), and at most Options.MaxHot blocks have one. So the cost of the long
// tail of blocks hit once or twice is the sketch, and the memory of heat is
// bounded by MaxHot windows, not by the number of blocks.

// maxBuckets bounds Options.Buckets so a window fits in 32 bytes.
const maxBuckets = 8

// window is one block's hits in the last Buckets buckets, a ring indexed by
// bucket number modulo Buckets. head is the newest bucket written.
type window struct {
	ring [maxBuckets]uint32
	head int64
}

// add counts n hits in bucket cur, clearing the buckets the window slid past.
func (w *window) add(cur int64, nb int, n uint32) {
	if d := cur - w.head; d > 0 {
		if d >= int64(nb) {
			w.ring = [maxBuckets]uint32{}
		} else {
			for b := w.head + 1; b <= cur; b++ {
				w.ring[b%int64(nb)] = 0
			}
		}
		w.head = cur
	} else if d < 0 {
		// A late hit for a bucket still in the window counts there; an
		// older one is dropped.
		if -d >= int64(nb) {
			return
		}
		cur = w.head + d
	}
	w.ring[cur%int64(nb)] = satAdd(w.ring[cur%int64(nb)], n)
}

// sum returns the hits in the window that ends with bucket cur: buckets
// cur-nb+1 .. cur. It does not modify the window.
func (w *window) sum(cur int64, nb int) uint32 {
	var s uint32
	for b := max(w.head-int64(nb)+1, cur-int64(nb)+1, 0); b <= w.head; b++ {
		s = satAdd(s, w.ring[b%int64(nb)])
	}
	return s
}

func satAdd(a, b uint32) uint32 {
	s, carry := bits.Add32(a, b, 0)
	if carry != 0 {
		return 1<<32 - 1
	}
	return s
}

// sketchRows is the depth of the count-min sketch: with 4 rows of 64K
// counters, a block's estimate exceeds its true count by more than 2N/64K
// (N hits in the sketch's memory) with probability e^-4, under 2%.
const sketchRows = 4

// sketch is a count-min sketch with conservative update and 16-bit
// saturating counters, halved every aging period so old hits fade (the reset
// of TinyLFU): an estimate covers roughly the last two periods.
type sketch struct {
	rows  [sketchRows][]uint16
	mask  uint64
	seed  [2]uint64
	epoch int64 // aging period of the last halving
}

func newSketch(width int, seed uint64) *sketch {
	s := &sketch{mask: uint64(width - 1)}
	for i := range s.rows {
		s.rows[i] = make([]uint16, width)
	}
	// Derive two words from the seed with splitmix64 steps.
	s.seed[0] = splitmix(seed)
	s.seed[1] = splitmix(s.seed[0])
	return s
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// hash mixes all 32 key bytes with the seed (wyhash's folded 128-bit
// products, as index's key tables do), so neither structured keys nor keys
// chosen by a client aim at a few counters unless the seed is known. It
// returns the two hashes of double hashing; the second is odd, so the rows
// probe distinct counters.
func (s *sketch) hash(k *block.Key) (uint64, uint64) {
	a := mum(binary.LittleEndian.Uint64(k[0:])^s.seed[0], binary.LittleEndian.Uint64(k[8:])^s.seed[1])
	b := mum(binary.LittleEndian.Uint64(k[16:])^s.seed[1], binary.LittleEndian.Uint64(k[24:])^s.seed[0])
	h := mum(a^0xa0761d6478bd642f, b^0xe7037ed1a0b428db)
	return h, splitmix(h) | 1
}

func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// age halves every counter once per aging period that has begun since the
// last call; after 16 periods everything is zero anyway.
func (s *sketch) age(epoch int64) {
	d := epoch - s.epoch
	if d <= 0 {
		return
	}
	s.epoch = epoch
	shift := uint(min(d, 16))
	for _, row := range s.rows {
		for i := range row {
			row[i] >>= shift
		}
	}
}

// add counts n hits of k and returns the new estimate. Conservative update:
// only the counters at the minimum grow, which keeps over-estimates of cold
// keys that share counters with hot ones small.
func (s *sketch) add(k *block.Key, n uint32) uint32 {
	h1, h2 := s.hash(k)
	var idx [sketchRows]uint64
	est := uint32(1<<16 - 1)
	for i := range s.rows {
		idx[i] = (h1 + uint64(i)*h2) & s.mask
		est = min(est, uint32(s.rows[i][idx[i]]))
	}
	next := min(est+min(n, 1<<16-1), 1<<16-1)
	for i := range s.rows {
		if uint32(s.rows[i][idx[i]]) < next {
			s.rows[i][idx[i]] = uint16(next)
		}
	}
	return next
}

// estimate returns the sketch's count of k.
func (s *sketch) estimate(k *block.Key) uint32 {
	h1, h2 := s.hash(k)
	est := uint32(1<<16 - 1)
	for i := range s.rows {
		est = min(est, uint32(s.rows[i][(h1+uint64(i)*h2)&s.mask]))
	}
	return est
}

func (s *sketch) bytes() int64 { return int64(len(s.rows)) * int64(len(s.rows[0])) * 2 }
