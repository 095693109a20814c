package resp

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/yuebing/yuebing/tier/dram"
)

// Inline values inside the DRAM budget. When the store's top tier can
// reserve space (the DRAM tier), inline values live on reservations taken
// from it a chunk at a time: as they grow the tier evicts blocks (demoting
// them) to make room, as they shrink the chunks go back. So a node never
// holds more than dram.capacity of values in DRAM, inline ones included,
// and the split between blocks and inline values follows the traffic
// instead of being fixed in advance (docs/resp.md, "Inline values").

// reserver is the optional capability of a top tier that can set space
// aside for memory it does not hold (*dram.DRAM).
type reserver interface {
	Reserve(ctx context.Context, n int64) (*dram.Reservation, error)
}

// shareChunk is how much is reserved at a time: large enough that a
// reservation (an eviction round in the tier) is rare next to the SETs
// that fill it (about 10,000 small keys), small enough that what is held
// beyond need is noise beside any real DRAM tier.
const shareChunk = 1 << 20

// share is the inline values' part of the top tier.
type share struct {
	r        reserver // nil: inline values sit beside the tier
	reserved atomic.Int64
	mu       struct {
		sync.Mutex
		held []*dram.Reservation
	}
}

// grow reserves chunks until need bytes are reserved, and reports whether
// it got there: it does not when the tier cannot give more (every block
// pinned or being read), and then the caller evicts inline values instead.
func (sh *share) grow(ctx context.Context, need int64) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for sh.reserved.Load() < need {
		r, err := sh.r.Reserve(ctx, shareChunk)
		if err != nil {
			return false
		}
		sh.mu.held = append(sh.mu.held, r)
		sh.reserved.Add(r.Size())
	}
	return true
}

// shrink gives back chunks while more than two are held beyond use: the
// slack keeps a key count that hovers at a chunk boundary from reserving
// and releasing on every SET.
func (sh *share) shrink(use int64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for n := len(sh.mu.held); n > 0 && sh.reserved.Load()-use > 2*shareChunk; n-- {
		r := sh.mu.held[n-1]
		sh.mu.held = sh.mu.held[:n-1]
		sh.reserved.Add(-r.Size())
		r.Release()
	}
}

// releaseAll gives every chunk back: at Shutdown, so that the inline
// values can be written into the tier as blocks.
func (sh *share) releaseAll() { sh.shrink(-1 << 62) }

// inlineLimit is what inline values may cost now: InlineCapacity, and
// within the top tier no more than is reserved from it.
func (s *Server) inlineLimit() int64 {
	if s.share.r == nil {
		return s.opts.InlineCapacity
	}
	return min(s.opts.InlineCapacity, s.share.reserved.Load())
}

// fitInline brings inline values within their limit after a write grew
// them: it reserves more of the top tier while InlineCapacity allows,
// and evicts inline values beyond what it could get.
func (s *Server) fitInline() {
	used := s.ks.inlineBytes.Load()
	target := s.opts.InlineCapacity
	if s.share.r != nil {
		if want := min(used, target); !s.share.grow(s.ctx, want) {
			target = s.share.reserved.Load()
		}
	}
	if used > target {
		s.evictInline(target)
	}
}
