package hitrate

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
)

// TierCache replays a trace through a real DRAM tier: each trace block is a
// 64-byte value under a key derived from its id. Contains asks the tier
// without touching its policy (Stat); Touch reads a cached block (Get, which
// records the use) or puts a missing one with its chain parent. It is how
// `yuebing bench hitrate --through-tier` shows that the tier gets the hit
// rates the simulator predicts.
type TierCache struct {
	ctx   context.Context
	t     *dram.DRAM
	value []byte
	err   error
}

var _ bench.ReplayCache = (*TierCache)(nil)

// NewTierCache makes a DRAM tier holding capacity blocks, evicting with the
// named policy.
func NewTierCache(ctx context.Context, policyName string, capacity int64) (*TierCache, error) {
	d, err := dram.New(dram.Options{Capacity: capacity * bench.TierValueSize, Policy: policyName, MaxBlockSize: bench.TierValueSize})
	if err != nil {
		return nil, fmt.Errorf("bench: replay tier: %w", err)
	}
	return &TierCache{ctx: ctx, t: d, value: make([]byte, bench.TierValueSize)}, nil
}

func replayKey(id int32) block.Key {
	var k block.Key
	binary.LittleEndian.PutUint32(k[:], uint32(id))
	k[31] = 0x5a // never the zero key
	return k
}

// Contains implements ReplayCache.
func (c *TierCache) Contains(id int32) bool {
	_, err := c.t.Stat(replayKey(id))
	return err == nil
}

// Touch implements ReplayCache.
func (c *TierCache) Touch(id, parent int32) {
	k := replayKey(id)
	if h, err := c.t.Get(c.ctx, k); err == nil {
		h.Release()
		return
	}
	opts := tier.PutOptions{}
	if parent != bench.NoParent {
		opts.Parent, opts.HasParent = replayKey(parent), true
	}
	if err := c.t.Put(c.ctx, k, c.value, opts); err != nil && c.err == nil {
		c.err = err
	}
}

// Err returns the first error a put returned; a replay whose puts failed
// does not measure the policy.
func (c *TierCache) Err() error { return c.err }

// Stats returns the tier's counters.
func (c *TierCache) Stats() tier.Stats { return c.t.Stats() }

// Close releases the tier.
func (c *TierCache) Close() error { return c.t.Close() }

// ReplayThroughTier replays t through a real DRAM tier of capacity blocks.
func ReplayThroughTier(ctx context.Context, t *bench.Trace, policyName string, capacity int64) (bench.ReplayResult, error) {
	c, err := NewTierCache(ctx, policyName, capacity)
	if err != nil {
		return bench.ReplayResult{}, err
	}
	defer c.Close()
	res := bench.Replay(t, c)
	return res, c.Err()
}
