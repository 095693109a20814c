package replicate

import (
	"bytes"
	"cmp"
	"slices"
)

func (c *Core) pressureDrops(out []Action) []Action {
	for i := range c.nodes {
		node := uint32(i)
		n := &c.nodes[i]
		if !n.up || n.toFree <= 0 || c.inflight >= c.opts.MaxInFlight {
			continue
		}
		type cand struct {
			b      *blockState
			pinned bool
			heat   uint32
		}
		var cands []cand
		for _, b := range c.tracked {
			if c.spare(b, node) {
				cands = append(cands, cand{b, b.pinnedUntil > c.now, c.priorityHeat(b)})
			}
		}
		slices.SortFunc(cands, func(x, y cand) int {
			if x.pinned != y.pinned {
				if x.pinned {
					return 1
				}
				return -1
			}
			if x.heat != y.heat {
				return cmp.Compare(x.heat, y.heat)
			}
			return bytes.Compare(x.b.key[:], y.b.key[:])
		})
		for _, cd := range cands {
			if n.toFree <= 0 || c.inflight >= c.opts.MaxInFlight {
				break
			}
			if !c.spare(cd.b, node) {
				continue
			}
			out = append(out, c.emit(cd.b, Drop, node, 0, ReasonPressure))
			n.toFree -= cd.b.sizeOr(c.opts.DefaultBlockSize)
		}
	}
	return out
}

// spare reports whether node's copy of b can go without taking b below its
// desired count: node holds it live, is not copying it elsewhere, and b has
// more live replicas than it wants.
func (c *Core) spare(b *blockState, node uint32) bool {
	if b.holderIndex(node) < 0 || b.pendingOn(Drop, node) || b.copyingFrom(node) {
		return false
	}
	return c.live(b) > b.want()
}

// cooledDrops drops b's surplus replicas, from the nodes under the most
// pressure, then the fullest and busiest, then the highest id.
func (c *Core) cooledDrops(b *blockState, out []Action) []Action {
	_, _, surplus := c.evaluate(b)
	for ; surplus > 0 && c.inflight < c.opts.MaxInFlight; surplus-- {
		victim, vscore := -1, 0.0
		for _, h := range b.holders {
			n := &c.nodes[h.node]
			if !n.up || b.pendingOn(Drop, h.node) || b.copyingFrom(h.node) {
				continue
			}
			score := n.load + fullness(n)
			if n.pressure > 0 {
				score += 10 // pressure outranks any load and fullness
			}
			if victim < 0 || score >= vscore {
				victim, vscore = int(h.node), score
			}
		}
		if victim < 0 {
			break
		}
		out = append(out, c.emit(b, Drop, uint32(victim), 0, ReasonCooled))
	}
	if surplus == 0 {
		b.surplusSince = 0
	}
	return out
}
