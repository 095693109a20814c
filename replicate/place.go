package replicate

import (
	"cmp"
	"container/heap"
	"slices"
	"time"

	"github.com/yuebing/yuebing/index"
)

// Tick returns the actions to take now: pressure drops first, then copies
// (repairs of pinned blocks, other repairs, hot blocks, each by heat), then
// drops of cooled replicas, as far as the in-flight bounds allow. It also
// times out actions, retries parked blocks and scans a slice of the tracked
// blocks. The returned slice is the caller's.
func (c *Core) Tick(now time.Time) []Action {
	c.advance(now)
	for len(c.opq) > 0 {
		o := c.opq[0]
		if !o.done && o.deadline > c.now {
			break
		}
		c.opq = c.opq[1:]
		if !o.done {
			c.stats.Timeouts++
			c.finish(o, ErrTimeout)
		}
	}
	c.unpark(false)
	cooled := c.scanStep()
	var out []Action
	out = c.pressureDrops(out)
	out = c.copies(out)
	for _, b := range cooled {
		out = c.cooledDrops(b, out)
	}
	return out
}

// scanStep examines the next ScanPerTick tracked blocks: lapsed pins and
// empty windows are cleared, blocks that need copies are queued, blocks
// with replicas to spare start (or finish) their cooldown, and blocks nothing
// keeps are forgotten. It returns the blocks whose cooldown is over.
func (c *Core) scanStep() []*blockState {
	var cooled []*blockState
	for visited := 0; visited < c.opts.ScanPerTick && len(c.tracked) > 0; visited++ {
		if c.scan >= len(c.tracked) {
			c.scan = 0
		}
		b := c.tracked[c.scan]
		if b.pinnedUntil != 0 && b.pinnedUntil <= c.now {
			b.pinnedUntil = 0
		}
		if b.hasWindow && b.heat.sum(c.bucket(), c.opts.Buckets) == 0 {
			b.hasWindow = false
			c.hot--
		}
		need, _, surplus := c.evaluate(b)
		switch {
		case surplus > 0 && b.surplusSince == 0:
			b.surplusSince = c.now
		case surplus > 0 && c.now-b.surplusSince >= int64(c.opts.Cooldown):
			cooled = append(cooled, b)
		case surplus == 0:
			b.surplusSince = 0
		}
		if need > 0 {
			c.check(b)
		}
		if c.forgettable(b) {
			c.untrack(b) // another block moved into this slot
			continue
		}
		c.scan++
	}
	return cooled
}

// check queues b if it needs copies and is neither queued nor waiting out a
// backoff.
func (c *Core) check(b *blockState) {
	if b.queued || b.parked {
		return
	}
	need, class, _ := c.evaluate(b)
	if need > 0 {
		b.queued = true
		heap.Push(&c.queue, qitem{b: b, class: class, heat: c.priorityHeat(b)})
	}
}

// Need classes, in the order the queue serves them.
const (
	classPinnedRepair = iota
	classRepair
	classHot
)

// evaluate returns how many copies b needs now (counting those in flight),
// the class of the need, and how many of its live replicas are surplus: above
// what its desired count and its heat ask to keep.
func (c *Core) evaluate(b *blockState) (need, class, surplus int) {
	live := c.live(b)
	if live == 0 {
		// Nothing to copy from, nothing to spare: the block waits for a
		// holder to come back (NodeUp, Added).
		return 0, 0, 0
	}
	copies := 0
	for _, p := range b.pending {
		if p.kind == Copy {
			copies++
		}
	}
	desired := min(b.want(), c.up)
	heat := c.heatOf(b)
	grow := min(max(desired, c.target(c.grow, heat)), c.up)
	keep := max(desired, c.target(c.keep, heat))
	switch {
	case live+copies < grow:
		need = grow - live - copies
		class = classHot
		if live+copies < desired {
			class = classRepair
			if b.pinnedUntil > c.now {
				class = classPinnedRepair
			}
		}
	case live > keep:
		surplus = live - keep
	}
	return need, class, surplus
}

// live counts b's holders that are up and not being dropped.
func (c *Core) live(b *blockState) int {
	n := 0
	for _, h := range b.holders {
		if c.nodes[h.node].up && !b.pendingOn(Drop, h.node) {
			n++
		}
	}
	return n
}
func (b *blockState) want() int { return max(1, int(b.desired)) }

func (b *blockState) sizeOr(def int64) int64 {
	if b.size > 0 {
		return b.size
	}
	return def
}

func (b *blockState) holderIndex(node uint32) int {
	for i, h := range b.holders {
		if h.node == node {
			return i
		}
	}
	return -1
}

func (b *blockState) addHolder(node uint32, tiers index.TierMask) {
	if i := b.holderIndex(node); i >= 0 {
		b.holders[i].tiers |= tiers
		return
	}
	b.holders = append(b.holders, holder{node: node, tiers: tiers})
	// Kept in node order, so every choice among holders is deterministic.
	slices.SortFunc(b.holders, func(x, y holder) int { return cmp.Compare(x.node, y.node) })
}

// removeHolder takes tiers away from node's copy; a copy with no tier left
// is gone.
func (b *blockState) removeHolder(node uint32, tiers index.TierMask) {
	i := b.holderIndex(node)
	if i < 0 {
		return
	}
	b.holders[i].tiers &^= tiers
	if b.holders[i].tiers == 0 {
		b.holders = slices.Delete(b.holders, i, i+1)
	}
}

func (b *blockState) pendingOn(kind Kind, node uint32) bool {
	for _, p := range b.pending {
		if p.kind == kind && p.node == node {
			return true
		}
	}
	return false
}

func (b *blockState) copyingFrom(node uint32) bool {
	for _, p := range b.pending {
		if p.kind == Copy && p.from == node {
			return true
		}
	}
	return false
}

func (b *blockState) noteRequester(node uint32) {
	for i := range int(b.reqLen) {
		if b.requesters[i] == node {
			return
		}
	}
	b.requesters[b.reqNext] = node
	b.reqNext = (b.reqNext + 1) % uint8(len(b.requesters))
	b.reqLen = min(b.reqLen+1, uint8(len(b.requesters)))
}

func (b *blockState) requested(node uint32) bool {
	for i := range int(b.reqLen) {
		if b.requesters[i] == node {
			return true
		}
	}
	return false
}

// unpark requeues parked blocks whose backoff is over, or all of them.
func (c *Core) unpark(all bool) {
	kept := c.parked[:0]
	for _, b := range c.parked {
		if all || b.retryAt <= c.now {
			b.parked = false
			c.check(b)
		} else {
			kept = append(kept, b)
		}
	}
	clear(c.parked[len(kept):])
	c.parked = kept
}

func (c *Core) park(b *blockState) {
	if b.parked {
		return
	}
	b.parked = true
	b.retryAt = c.now + int64(c.opts.RetryBackoff)
	c.parked = append(c.parked, b)
}

// maxDeferred bounds the blocks a Tick sets aside because their sources or
// targets are at their in-flight bound: after a node dies, hundreds of
// thousands of blocks may wait behind the same few sources, and a tick should
// not pop and push them all to find that nothing can start.
const maxDeferred = 1024

// copies serves the queue while the in-flight bounds allow.
func (c *Core) copies(out []Action) []Action {
	var deferred []*blockState
	for c.inflight < c.opts.MaxInFlight && c.queue.Len() > 0 && len(deferred) < maxDeferred {
		b := heap.Pop(&c.queue).(qitem).b
		b.queued = false
		if b.parked {
			continue // failed meanwhile: it waits out its backoff
		}
		need, class, _ := c.evaluate(b)
		reason := ReasonRepair
		if class == classHot {
			reason = ReasonHot
		}
		for ; need > 0 && c.inflight < c.opts.MaxInFlight; need-- {
			from, fromOK, busy := c.pickSource(b)
			if !fromOK {
				if busy {
					deferred = append(deferred, b)
				} else {
					c.park(b) // no live copy to copy from
				}
				break
			}
			to, toOK, busy := c.pickTarget(b)
			if !toOK {
				if busy {
					deferred = append(deferred, b)
				} else {
					c.park(b) // no node can take it
				}
				break
			}
			out = append(out, c.emit(b, Copy, to, from, reason))
		}
		if need > 0 && !b.parked && !slices.Contains(deferred, b) {
			deferred = append(deferred, b) // out of budget
		}
	}
	for _, b := range deferred {
		c.check(b)
	}
	return out
}

// pickSource chooses the holder to copy b from: up, not being dropped, not
// at its in-flight bound; a DRAM copy before others, then the least loaded,
// then the least busy, then the lowest id. busy reports that holders exist
// but are all at their bound.
func (c *Core) pickSource(b *blockState) (node uint32, ok, busy bool) {
	best := -1
	for i, h := range b.holders {
		n := &c.nodes[h.node]
		if !n.up || b.pendingOn(Drop, h.node) {
			continue
		}
		if n.busy >= c.opts.MaxInFlightPerNode {
			busy = true
			continue
		}
		if best < 0 || sourceBetter(h, n, b.holders[best], &c.nodes[b.holders[best].node]) {
			best = i
		}
	}
	if best < 0 {
		return 0, false, busy
	}
	return b.holders[best].node, true, false
}

func sourceBetter(h holder, n *nodeState, bh holder, bn *nodeState) bool {
	if d, bd := h.tiers.Has(0), bh.tiers.Has(0); d != bd {
		return d
	}
	if n.load != bn.load {
		return n.load < bn.load
	}
	if n.busy != bn.busy {
		return n.busy < bn.busy
	}
	return h.node < bh.node
}

// pickTarget chooses the node to copy b to: up, not holding it or receiving
// it, not under pressure, below its in-flight bound, with room for the block
// after the copies already in flight to it. Among those: a node that used the
// block lately without holding it, then the lowest load plus fullness (both
// 0 to 1, so an idle half-full node ties with a half-busy empty one), with the
// target of the last failed copy last and the lowest id breaking ties. busy
// reports that a node would qualify but for its in-flight bound.
func (c *Core) pickTarget(b *blockState) (node uint32, ok, busy bool) {
	size := b.sizeOr(c.opts.DefaultBlockSize)
	best, bestScore := -1, 0.0
	bestReq, bestFailed := false, false
	for i := range c.nodes {
		n := &c.nodes[i]
		id := uint32(i)
		if !n.up || n.pressure > 0 || n.free-n.reserved < size || b.holderIndex(id) >= 0 || b.pendingOn(Copy, id) {
			continue
		}
		if n.busy >= c.opts.MaxInFlightPerNode {
			busy = true
			continue
		}
		req, failed := b.requested(id), b.failed == id+1
		score := n.load + fullness(n)
		better := best < 0
		if !better {
			switch {
			case failed != bestFailed:
				better = !failed
			case req != bestReq:
				better = req
			default:
				better = score < bestScore // ties keep the lower id
			}
		}
		if better {
			best, bestScore, bestReq, bestFailed = i, score, req, failed
		}
	}
	if best < 0 {
		return 0, false, busy
	}
	return uint32(best), true, false
}

// fullness is the share of a node's capacity not free, counting copies in
// flight to it.
func fullness(n *nodeState) float64 {
	if n.capacity <= 0 {
		return 1
	}
	return 1 - float64(n.free-n.reserved)/float64(n.capacity)
}

// pressureDrops answers nodes under pressure, by node id: replicas of blocks
// above their desired count, unpinned before pinned, coldest first.
func (c *Core) emit(b *blockState, kind Kind, node, from uint32, reason Reason) Action {
	id := c.nextID
	c.nextID++
	p := pending{id: id, kind: kind, node: node, from: from}
	b.pending = append(b.pending, p)
	o := &op{pending: p, b: b, deadline: c.now + int64(c.opts.ActionTimeout)}
	c.ops[id] = o
	c.opq = append(c.opq, o)
	c.inflight++
	if kind == Copy {
		c.nodes[from].busy++
		c.nodes[node].busy++
		c.nodes[node].reserved += b.sizeOr(c.opts.DefaultBlockSize)
		c.stats.Copies++
	} else {
		c.stats.Drops++
	}
	return Action{ID: id, Kind: kind, Key: b.key, Node: node, From: from, Reason: reason}
}

// finish ends an action: its bounds are released and, if it succeeded, its
// effect is recorded without waiting for the node's own event.
func (c *Core) finish(o *op, err error) {
	o.done = true
	delete(c.ops, o.id)
	b := o.b
	if i := slices.IndexFunc(b.pending, func(p pending) bool { return p.id == o.id }); i >= 0 {
		b.pending = slices.Delete(b.pending, i, i+1)
	}
	c.inflight--
	size := b.sizeOr(c.opts.DefaultBlockSize)
	if o.kind == Copy {
		c.nodes[o.from].busy--
		c.nodes[o.node].busy--
		c.nodes[o.node].reserved -= size
	}
	switch {
	case err != nil:
		c.stats.Failed++
		if o.kind == Copy {
			b.failed = o.node + 1
			c.park(b)
		}
	case o.kind == Copy:
		b.addHolder(o.node, 0)
		c.nodes[o.node].free -= size
	default:
		if i := b.holderIndex(o.node); i >= 0 {
			b.holders = slices.Delete(b.holders, i, i+1)
		}
		c.nodes[o.node].free += size
	}
	c.check(b)
}
