package hitrate

import (
	"fmt"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/tier/policy"
)

// SSD admission policies: which blocks evicted from DRAM are written to SSD.
const (
	// AdmitAll writes every evicted block that SSD does not hold yet (what
	// the hierarchy does today).
	AdmitAll = "all"
	// AdmitReuse writes a block only if it was read again while in DRAM.
	AdmitReuse = "reuse"
	// AdmitSeenTwice writes a block read again while in DRAM, or one that
	// was evicted unadmitted before and came back (a ghost list of recent
	// unadmitted evictions four times as long as the SSD holds blocks).
	AdmitSeenTwice = "seen-twice"
	// AdmitChain, AdmitLearned and AdmitReturns are the hierarchy's own chain-aware
	// policies (tier/policy.Admission), run here by the same code.
	AdmitChain   = policy.AdmitChain
	AdmitLearned = policy.AdmitLearned
	AdmitReturns = policy.AdmitReturns
	// AdmitOracle is a bound, not a policy: it reads the trace ahead and
	// writes a block only if some later request uses it again and its chain
	// parent is held (a prefix hit could reach it). It shows how few writes
	// the hit rate needs, for a predictor that knew the future.
	AdmitOracle = "oracle"
)

// Admissions lists the admission policies, today's first and the bound last.
var Admissions = []string{AdmitAll, AdmitReuse, AdmitSeenTwice, AdmitChain, AdmitLearned, AdmitReturns, AdmitOracle}

// BlockBytes is the KV size of one 512-token trace block of LLaMA3-70B in
// bf16 (80 layers x K and V x 8 KV heads x 128 dims x 2 bytes = 320 KiB per
// token), the model the compute figures use.
const BlockBytes = bench.TraceBlockTokens * 80 * 2 * 8 * 128 * 2

// TwoTierCache simulates DRAM over SSD, both LRU, as the hierarchy runs
// them: a miss is put in DRAM; a block evicted from DRAM is written to SSD
// if the admission policy admits it and SSD has no copy; a prefix hit in SSD
// is read from it and copied up to DRAM (the SSD copy stays).
type TwoTierCache struct {
	admission          string
	dram, ssd          *policy.LRU[int32]
	dramCap, ssdCap    int
	inDRAM, inSSD      map[int32]bool
	reused             map[int32]bool // read again while in DRAM
	ghost              map[int32]bool
	ghostQ             []int32
	ssdOnlyPrefix      map[int32]bool           // asked by Contains in this request's prefix
	chain              *policy.Admission[int32] // AdmitChain, AdmitLearned
	SSDWrites, SSDHits int64                    // blocks

	// For AdmitOracle: the trace, and how many of each block's accesses
	// are still to come.
	trace *bench.Trace
	left  []int32

	// An optional object tier (S3) below SSD: every block SSD evicts is
	// demoted to it, and a prefix hit there is copied up to DRAM.
	obj     *policy.LRU[int32]
	objCap  int
	inObj   map[int32]bool
	objOnly map[int32]bool
	ObjHits int64 // blocks
	ObjPuts int64 // blocks
}

// WithObjectTier adds an object tier of the given blocks below SSD.
func (c *TwoTierCache) WithObjectTier(blocks int64) *TwoTierCache {
	c.obj, c.objCap = policy.NewLRU[int32](), int(blocks)
	c.inObj, c.objOnly = map[int32]bool{}, map[int32]bool{}
	return c
}

// NewTwoTierCache makes the cache; capacities are in blocks.
func NewTwoTierCache(admission string, dramBlocks, ssdBlocks int64) (*TwoTierCache, error) {
	var chain *policy.Admission[int32]
	switch admission {
	case AdmitAll, AdmitReuse, AdmitSeenTwice, AdmitOracle:
	case AdmitChain, AdmitLearned, AdmitReturns:
		chain, _ = policy.NewAdmission[int32](admission, int(ssdBlocks)*ghostMul)
	default:
		return nil, fmt.Errorf("%w: unknown SSD admission %q: want one of %v", bench.ErrOptions, admission, Admissions)
	}
	return &TwoTierCache{chain: chain,
		admission: admission, dram: policy.NewLRU[int32](), ssd: policy.NewLRU[int32](),
		dramCap: int(dramBlocks), ssdCap: int(ssdBlocks),
		inDRAM: map[int32]bool{}, inSSD: map[int32]bool{}, reused: map[int32]bool{}, ghost: map[int32]bool{},
		ssdOnlyPrefix: map[int32]bool{},
	}, nil
}

// WithTrace gives AdmitOracle the trace it replays, which it reads ahead;
// the replay must run that trace's requests in order.
func (c *TwoTierCache) WithTrace(t *bench.Trace) *TwoTierCache {
	c.trace, c.left = t, make([]int32, t.Blocks())
	for pos := range t.Accesses() {
		c.left[t.Access(pos)]++
	}
	return c
}

var _ bench.ReplayCache = (*TwoTierCache)(nil)

// Contains implements bench.ReplayCache.
func (c *TwoTierCache) Contains(id int32) bool {
	if c.inDRAM[id] {
		return true
	}
	if c.inSSD[id] {
		c.ssdOnlyPrefix[id] = true
		return true
	}
	if c.obj != nil && c.inObj[id] {
		c.objOnly[id] = true
		return true
	}
	return false
}

// Touch implements bench.ReplayCache.
func (c *TwoTierCache) Touch(id, parent int32) {
	if c.left != nil {
		c.left[id]--
	}
	if c.inDRAM[id] {
		c.dram.Access(id)
		c.reused[id] = true
		if c.chain != nil {
			c.chain.Access(id)
		}
		return
	}
	switch {
	case c.inSSD[id]:
		c.ssd.Access(id)
		if c.chain != nil {
			c.chain.Access(id)
		}
		if c.ssdOnlyPrefix[id] {
			c.SSDHits++
			delete(c.ssdOnlyPrefix, id)
			if c.chain != nil {
				c.chain.HitBelow(id)
			}
		}
	case c.obj != nil && c.inObj[id]:
		c.obj.Access(id)
		if c.objOnly[id] {
			c.ObjHits++
			delete(c.objOnly, id)
		}
		fallthrough // a new copy above the SSD, as a put is
	default:
		if c.chain != nil {
			c.chain.Put(id, parent, parent != bench.NoParent)
		}
	}
	for len(c.inDRAM) >= c.dramCap {
		v, ok := c.dram.Evict(nil)
		if !ok {
			break
		}
		c.evictedFromDRAM(v)
	}
	c.dram.Add(id, policy.Info[int32]{Size: 1})
	c.inDRAM[id] = true
}

func (c *TwoTierCache) evictedFromDRAM(id int32) {
	reused := c.reused[id]
	delete(c.inDRAM, id)
	delete(c.reused, id)
	if c.inSSD[id] || c.ssdCap == 0 {
		return // a clean copy is below already, or there is no SSD
	}
	admit := c.admission == AdmitAll || reused || c.admission == AdmitSeenTwice && c.ghost[id]
	if c.admission == AdmitOracle {
		admit = c.oracleAdmits(id)
	}
	if c.chain != nil {
		admit = c.chain.Admit(id, c.held)
		if !admit {
			c.chain.Forget(id)
		}
	}
	if !admit {
		if c.admission == AdmitSeenTwice && !c.ghost[id] {
			c.ghost[id] = true
			c.ghostQ = append(c.ghostQ, id)
			for len(c.ghostQ) > c.ssdCap*ghostMul {
				delete(c.ghost, c.ghostQ[0])
				c.ghostQ = c.ghostQ[1:]
			}
		}
		return
	}
	delete(c.ghost, id)
	for len(c.inSSD) >= c.ssdCap {
		v, ok := c.ssd.Evict(nil)
		if !ok {
			break
		}
		delete(c.inSSD, v)
		if c.chain != nil {
			c.chain.Dropped(v)
			if !c.inDRAM[v] {
				c.chain.Forget(v)
			}
		}
		c.demoteToObject(v)
	}
	c.ssd.Add(id, policy.Info[int32]{Size: 1})
	c.inSSD[id] = true
	c.SSDWrites++
}

// oracleAdmits reports whether a later request uses id again, with its
// parent held; without the trace (WithTrace) it admits nothing.
func (c *TwoTierCache) oracleAdmits(id int32) bool {
	if c.trace == nil || c.left[id] <= 0 {
		return false
	}
	p := c.trace.Parent(id)
	return p == bench.NoParent || c.held(p)
}

func (c *TwoTierCache) held(id int32) bool { return c.inDRAM[id] || c.inSSD[id] }

// ghostMul sizes the ghost list at this many times the SSD's blocks: on
// both traces 4 keeps more returning blocks than 1 or 2, and 8 or 16 no more.
const ghostMul = 4

func (c *TwoTierCache) demoteToObject(id int32) {
	if c.obj == nil || c.inObj[id] {
		return
	}
	for len(c.inObj) >= c.objCap {
		v, ok := c.obj.Evict(nil)
		if !ok {
			break
		}
		delete(c.inObj, v)
	}
	c.obj.Add(id, policy.Info[int32]{Size: 1})
	c.inObj[id] = true
	c.ObjPuts++
}
