package replicate

import (
	"github.com/yuebing/yuebing/block"
)

// hit counts n hits of k by node.
func (c *Core) hit(node uint32, k *block.Key, n uint32) {
	b := c.blocks[*k]
	if b != nil && b.hasWindow {
		b.heat.add(c.bucket(), c.opts.Buckets, n)
	} else {
		est := c.sketch.add(k, n)
		if est < c.opts.TrackFloor || !c.admitHot(est) {
			return
		}
		if b == nil {
			b = c.track(*k)
		}
		// The window starts with what the sketch counted, so a block
		// crossing the floor does not start cold.
		b.hasWindow = true
		c.hot++
		b.heat = window{head: c.bucket()}
		b.heat.add(c.bucket(), c.opts.Buckets, est)
	}
	if b.holderIndex(node) < 0 {
		b.noteRequester(node)
	}
	c.check(b)
}

// hotSample is how many windowed blocks admitHot compares: the coldest of 8
// random ones is in the coldest 20% with probability 1-0.8^8 = 83% (Redis's
// approximated LRU samples 5).
const hotSample = 8

// admitHot makes room for one more heat window if a block with estimate est
// deserves it: below MaxHot always, else by taking the window of the coldest
// of a sample of windowed blocks, if it is colder than est.
func (c *Core) admitHot(est uint32) bool {
	if c.hot < c.opts.MaxHot {
		return true
	}
	var victim *blockState
	var vheat uint32
	for tries, found := 0, 0; tries < 4*hotSample && found < hotSample; tries++ {
		b := c.tracked[c.rng.IntN(len(c.tracked))]
		if !b.hasWindow {
			continue
		}
		found++
		if h := b.heat.sum(c.bucket(), c.opts.Buckets); victim == nil || h < vheat {
			victim, vheat = b, h
		}
	}
	if victim == nil || vheat >= est {
		return false
	}
	victim.hasWindow = false
	c.hot--
	if c.forgettable(victim) {
		c.untrack(victim)
	}
	return true
}

// track starts tracking k, learning its holders from the Locations.
func (c *Core) track(k block.Key) *blockState {
	if b := c.blocks[k]; b != nil {
		return b
	}
	b := &blockState{key: k, slot: len(c.tracked)}
	if c.loc != nil {
		c.buf = c.loc.AppendHolders(c.buf[:0], k)
		for _, h := range c.buf {
			// The index may name a node the core has had no event of yet
			// (its first report is being applied): give it a slot.
			if c.checkNode(h.Node) != nil {
				continue
			}
			b.holders = append(b.holders, holder{node: h.Node, tiers: h.Tiers})
		}
	}
	c.blocks[k] = b
	c.tracked = append(c.tracked, b)
	return b
}

func (c *Core) untrack(b *blockState) {
	last := c.tracked[len(c.tracked)-1]
	c.tracked[b.slot] = last
	last.slot = b.slot
	c.tracked = c.tracked[:len(c.tracked)-1]
	delete(c.blocks, b.key)
	if b.hasWindow {
		c.hot--
	}
}

// forgettable reports whether nothing keeps b tracked.
func (c *Core) forgettable(b *blockState) bool {
	if b.hasWindow || b.desired != 0 || b.pinnedUntil != 0 || len(b.pending) > 0 || b.queued || b.parked {
		return false
	}
	_, _, surplus := c.evaluate(b)
	return surplus == 0
}

// target returns the replicas heat asks for by the thresholds th.
func (c *Core) target(th []uint32, heat uint32) int {
	r := 1
	for r < c.opts.MaxReplicas && heat >= th[r+1] {
		r++
	}
	return r
}

func (c *Core) heatOf(b *blockState) uint32 {
	if !b.hasWindow {
		return 0
	}
	return b.heat.sum(c.bucket(), c.opts.Buckets)
}

// priorityHeat orders work: the window if there is one, else the sketch's
// estimate, so repairs of blocks not hot enough for a window still go by
// heat.
func (c *Core) priorityHeat(b *blockState) uint32 {
	if b.hasWindow {
		return c.heatOf(b)
	}
	return c.sketch.estimate(&b.key)
}
