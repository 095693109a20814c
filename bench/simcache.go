package bench

import (
	"fmt"

	"github.com/yuebing/yuebing/tier/policy"
)

// PolicyCache is the simulator's bounded cache: a set of dense block ids,
// sized in blocks, ordered by an eviction policy from package policy (the
// same code the DRAM tier runs).
//
// The policy sees each block as blockUnit units and the capacity in the same
// units, as a tier sees bytes: policies that step or split by a fraction of
// the capacity then round the way they do in a tier (where capacity/3333 is
// a fraction of a block, not a truncated whole one), and a replay through a
// real tier holding blockUnit-byte values runs exactly the same arithmetic.
type PolicyCache struct {
	p        policy.Policy[int32]
	present  []bool
	capacity int64 // blocks
	used     int64
}

var _ ReplayCache = (*PolicyCache)(nil)

// NewPolicyCache makes a cache of capacity blocks for ids below blocks.
func NewPolicyCache(name string, capacity int64, blocks int) (*PolicyCache, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("%w: capacity of %d blocks; a cache needs at least one", ErrOptions, capacity)
	}
	p, err := policy.New[int32](name, capacity*blockUnit)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	return &PolicyCache{p: p, present: make([]bool, blocks), capacity: capacity}, nil
}

func (c *PolicyCache) Contains(id int32) bool { return c.present[id] }

func (c *PolicyCache) Touch(id, parent int32) { _ = c.TouchEvicting(id, parent, nil) }

// TouchEvicting is Touch reporting each block it evicts to evicted (when not
// nil), as a simulated instance tells the scheduler what it dropped; an error
// from evicted stops it before id is added.
func (c *PolicyCache) TouchEvicting(id, parent int32, evicted func(victim int32) error) error {
	if c.present[id] {
		c.p.Access(id)
		return nil
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
		if evicted != nil {
			if err := evicted(victim); err != nil {
				return err
			}
		}
	}
	c.p.Add(id, policy.Info[int32]{Size: blockUnit, Parent: parent, HasParent: parent != NoParent})
	c.present[id] = true
	c.used++
	return nil
}

// blockUnit is the size of one block in policy units; see policyCache.
const blockUnit = TierValueSize

// unboundedCache keeps every block: the hit rate with infinite space.
type unboundedCache struct{ present []bool }

var _ ReplayCache = (*unboundedCache)(nil)

func NewUnboundedCache(blocks int) *unboundedCache {
	return &unboundedCache{present: make([]bool, blocks)}
}

func (c *unboundedCache) Contains(id int32) bool { return c.present[id] }
func (c *unboundedCache) Touch(id, _ int32)      { c.present[id] = true }

// TierValueSize is the value each replayed block stores in a real tier: one
// 64-byte allocation granule, so a tier of capacity C bytes holds exactly
// C/64 blocks, as the simulator's cache of C/64 blocks does.
const TierValueSize = 64
