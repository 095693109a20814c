package bench

import (
	"fmt"
	"math"
)

// ReplayCache is a cache that a trace is replayed through: the simulator's
// policy caches, the Belady bound, or a real tier behind an adapter. Ids are
// a Trace's dense block ids; an adapter for a real store can turn them into
// keys (any injective mapping works, e.g. the id's bytes under a namespace).
//
// Replay calls Contains for the leading blocks of a request and then Touch
// for every block of it, first to last. A cache must not change what it holds
// in Contains.
type ReplayCache interface {
	// Contains reports whether block id is cached.
	Contains(id int32) bool
	// Touch records a use of block id by the current request: a cached
	// block is marked used, a missing one is inserted, evicting others as the
	// cache needs. parent is the block before id in the request, or NoParent.
	Touch(id, parent int32)
}

// ReplayResult totals a replay.
type ReplayResult struct {
	Requests    int
	Blocks      int64 // block accesses
	HitBlocks   int64 // accesses that were prefix hits
	InputTokens int64
	HitTokens   int64 // prompt tokens whose KV cache was reused

	// PrefillFLOPs is the prefill compute of all requests with no cache;
	// SavedFLOPs is the part the hits saved (see PrefillFLOPs).
	PrefillFLOPs, SavedFLOPs float64
}

// HitRate is HitBlocks/Blocks, the paper's cache hit rate.
func (r ReplayResult) HitRate() float64 { return Ratio(float64(r.HitBlocks), float64(r.Blocks)) }

// ComputeSaved is the fraction of prefill FLOPs the hits saved.
func (r ReplayResult) ComputeSaved() float64 { return Ratio(r.SavedFLOPs, r.PrefillFLOPs) }

func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Add counts one request of inputTokens tokens with hits leading blocks hit.
func (r *ReplayResult) Add(inputTokens int64, blocks, hits int) {
	if hits > blocks {
		panic(fmt.Sprintf("BUG: bench: %d hits in a request of %d blocks", hits, blocks))
	}
	// The last block may be partial: a hit on it reuses only what it holds.
	p := min(int64(hits)*TraceBlockTokens, inputTokens)
	r.Requests++
	r.Blocks += int64(blocks)
	r.HitBlocks += int64(hits)
	r.InputTokens += inputTokens
	r.HitTokens += p
	r.PrefillFLOPs += PrefillFLOPs(inputTokens)
	r.SavedFLOPs += PrefillFLOPs(p)
}

// Replay runs every request of t through c in trace order and totals the
// hits. The model is the paper's (section 5.3.1): a request's hit blocks are
// its leading blocks that c holds, up to the first miss, since KV cache is
// reusable only for a prefix; then all of its blocks are inserted or touched,
// first to last. Replay is the single model loop: the hit-rate sweep, the
// pool comparison and a replay through a real tier all run through it.
func Replay(t *Trace, c ReplayCache) ReplayResult {
	var res ReplayResult
	for i := range t.reqs {
		ids, n := t.Request(i)
		res.Add(n, len(ids), ReplayRequest(ids, c))
	}
	return res
}

// ReplayRequest runs one request's blocks through c (see Replay) and returns
// its hit blocks. Drivers that route requests among several caches call it
// with the cache they chose.
func ReplayRequest(ids []int32, c ReplayCache) int {
	hits := PrefixHits(ids, c)
	parent := NoParent
	for _, id := range ids {
		c.Touch(id, parent)
		parent = id
	}
	return hits
}

// PrefixHits returns how many leading blocks of ids c holds, without
// touching them: the prefix a request would reuse from c.
func PrefixHits(ids []int32, c ReplayCache) int {
	for i, id := range ids {
		if !c.Contains(id) {
			return i
		}
	}
	return len(ids)
}

// RatioOrNaN is a/b, or NaN (reported as "not measured") when b is 0.
func RatioOrNaN(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
