package bench

import (
	"fmt"

	"github.com/yuebing/yuebing/tier/policy"
)

// policyCache is the simulator's bounded cache: a set of dense block ids,
// sized in blocks, ordered by an eviction policy from package policy (the
// same code the DRAM tier runs).
//
// The policy sees each block as blockUnit units and the capacity in the same
// units, as a tier sees bytes: policies that step or split by a fraction of
// the capacity then round the way they do in a tier (where capacity/3333 is
// a fraction of a block, not a truncated whole one), and a replay through a
// real tier holding blockUnit-byte values runs exactly the same arithmetic.
type policyCache struct {
	p        policy.Policy[int32]
	present  []bool
	capacity int64 // blocks
	used     int64
}

var _ ReplayCache = (*policyCache)(nil)

// newPolicyCache makes a cache of capacity blocks for ids below blocks.
func newPolicyCache(name string, capacity int64, blocks int) (*policyCache, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("%w: capacity of %d blocks; a cache needs at least one", ErrOptions, capacity)
	}
	p, err := policy.New[int32](name, capacity*blockUnit)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	return &policyCache{p: p, present: make([]bool, blocks), capacity: capacity}, nil
}

func (c *policyCache) Contains(id int32) bool { return c.present[id] }

func (c *policyCache) Touch(id, parent int32) {
	if c.present[id] {
		c.p.Access(id)
		return
	}
	for c.used >= c.capacity {
		victim, ok := c.p.Evict(nil)
		if !ok {
			panic(fmt.Sprintf("BUG: bench: policy found no victim among %d blocks", c.used))
		}
		if !c.present[victim] {
			panic(fmt.Sprintf("BUG: bench: policy evicted block %d, which is not cached", victim))
		}
		c.present[victim] = false
		c.used--
	}
	c.p.Add(id, policy.Info[int32]{Size: blockUnit, Parent: parent, HasParent: parent != NoParent})
	c.present[id] = true
	c.used++
}

// blockUnit is the size of one block in policy units; see policyCache.
const blockUnit = tierValueSize

// unboundedCache keeps every block: the hit rate with infinite space.
type unboundedCache struct{ present []bool }

var _ ReplayCache = (*unboundedCache)(nil)

func newUnboundedCache(blocks int) *unboundedCache {
	return &unboundedCache{present: make([]bool, blocks)}
}

func (c *unboundedCache) Contains(id int32) bool { return c.present[id] }
func (c *unboundedCache) Touch(id, _ int32)      { c.present[id] = true }
