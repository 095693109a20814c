package replicate

import (
	"bytes"
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
	"unsafe"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// Locations is the core's read-only view of where blocks are: the leader's
// global index, which *index.Global satisfies. The core reads it only when it
// starts tracking a block (to learn the block's holders) and when a node comes
// up (to learn which tracked blocks it holds); after that, Added, Removed and
// acknowledged actions keep its view current. Apply a node's events to the
// index before stepping them into the core.
type Locations interface {
	AppendHolders(dst []index.Holder, k block.Key) []index.Holder
	NodeTiers(node uint32, k block.Key) index.TierMask
}

var _ Locations = (*index.Global)(nil)

// Core decides replication: given events and the time, it says which blocks
// to copy where and which replicas to drop. It is deterministic (the same
// Options, Locations contents and events in the same order give the same
// actions), starts no goroutines and does no I/O; Driver runs it against an
// Executor. A Core is not safe for concurrent use.
//
// It tracks a subset of blocks: those with a heat window (hot enough to have
// reached Options.TrackFloor, at most Options.MaxHot of them), a desired count
// above 1, a pin, an action in flight, or replicas to spare. Events about
// other blocks are ignored: the global index is the record of where they are.
type Core struct {
	opts        Options
	loc         Locations
	now         int64 // Unix nanoseconds of the latest Step or Tick
	bucketNanos int64
	// grow[r] is the heat at which a block wants r replicas, keep[r] the
	// heat down to which it keeps them (r >= 2; 0 and 1 unused).
	grow, keep []uint32

	nodes []nodeState
	up    int

	blocks  map[block.Key]*blockState
	tracked []*blockState // every tracked block, in a deterministic order
	hot     int           // tracked blocks with a heat window
	sketch  *sketch
	rng     *rand.Rand

	ops      map[uint64]*op
	opq      []*op // in id order, which is deadline order
	nextID   uint64
	inflight int

	queue  wantQueue
	parked []*blockState
	scan   int // next tracked block the scan examines

	stats Stats
	buf   []index.Holder
}

type nodeState struct {
	up             bool
	capacity, free int64
	load           float64
	pressure       int64 // bytes the node last asked for; no copies to it while > 0
	toFree         int64 // of those, bytes not yet answered with drops
	reserved       int64 // bytes of copies in flight to it
	busy           int   // copies in flight from or to it
}

type holder struct {
	node  uint32
	tiers index.TierMask // 0: holds it, tier not yet reported
}

type pending struct {
	id   uint64
	kind Kind
	node uint32 // target of a copy, victim of a drop
	from uint32
}

type op struct {
	pending
	b        *blockState
	deadline int64
	done     bool
}

type blockState struct {
	key          block.Key
	slot         int   // index in Core.tracked
	desired      uint8 // 0: the default, 1
	hasWindow    bool
	queued       bool
	parked       bool
	failed       uint32 // 1 + the target of the last failed copy; 0 none
	size         int64  // 0: unknown
	pinnedUntil  int64
	surplusSince int64
	retryAt      int64
	heat         window
	holders      []holder
	pending      []pending
	// requesters are the latest nodes that used the block without holding
	// it: the first places for a new replica.
	requesters [4]uint32
	reqLen     uint8
	reqNext    uint8
}

// Stats are the core's counters and sizes.
type Stats struct {
	Tracked, Hot, Queued, Parked, InFlight int
	// Copies, Drops: actions emitted so far; Failed: acknowledged with an
	// error or timed out (Timeouts of them timed out).
	Copies, Drops, Failed, Timeouts int64
	// MemoryBytes estimates the core's memory: the sketch and the tracked
	// blocks.
	MemoryBytes int64
}

// BlockStatus is what the core knows of one tracked block.
type BlockStatus struct {
	Key block.Key
	// Heat is the block's hits in the last window (0 without a window).
	Heat uint32
	// Replicas counts the holders that are up; Desired is the block's
	// desired count (1 unless set).
	Replicas, Desired int
	Pinned            bool
	InFlight          int
}

// NewCore returns a core with no nodes and no blocks. loc may be nil, in which
// case the core learns holders only from Added events of tracked blocks. It
// panics if opts are invalid; validate user-supplied options first.
func NewCore(opts Options, loc Locations) *Core {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		panic("BUG: " + err.Error())
	}
	c := &Core{
		opts:        opts,
		loc:         loc,
		bucketNanos: int64(opts.Window) / int64(opts.Buckets),
		blocks:      map[block.Key]*blockState{},
		sketch:      newSketch(opts.SketchWidth, opts.Seed),
		rng:         rand.New(rand.NewPCG(opts.Seed, 0x7265706c)),
		ops:         map[uint64]*op{},
		nextID:      1,
	}
	c.grow = make([]uint32, opts.MaxReplicas+1)
	c.keep = make([]uint32, opts.MaxReplicas+1)
	for r := 2; r <= opts.MaxReplicas; r++ {
		g := float64(opts.HotHits) * math.Pow(opts.HotFactor, float64(r-2))
		c.grow[r] = uint32(min(g, math.MaxUint32))
		c.keep[r] = uint32(max(1, min(g*opts.KeepRatio, math.MaxUint32)))
	}
	return c
}

func (c *Core) advance(now time.Time) {
	if n := now.UnixNano(); n > c.now {
		c.now = n
	}
	c.sketch.age(c.now / int64(c.opts.Window))
}

func (c *Core) bucket() int64 { return c.now / c.bucketNanos }

func (c *Core) checkNode(node uint32) error {
	if uint64(node) >= uint64(c.opts.MaxNodes) {
		return fmt.Errorf("%w: node %d, MaxNodes %d", ErrInvalidEvent, node, c.opts.MaxNodes)
	}
	for int(node) >= len(c.nodes) {
		c.nodes = append(c.nodes, nodeState{})
	}
	return nil
}

// Step takes one event at time now. Times never go back: an event older than
// one already seen counts as happening at the latest time. Step returns an
// error wrapping ErrInvalidEvent, and changes nothing, for an invalid event.
func (c *Core) Step(now time.Time, ev Event) error {
	if err := c.validate(ev); err != nil {
		return err
	}
	c.advance(now)
	switch e := ev.(type) {
	case Hits:
		for i := range e.Keys {
			n := uint32(1)
			if e.Counts != nil {
				n = e.Counts[i]
			}
			if n > 0 {
				c.hit(e.Node, &e.Keys[i], n)
			}
		}
	case Added:
		if b := c.blocks[e.Key]; b != nil {
			b.addHolder(e.Node, index.TierMask(0).With(int(e.Tier)))
			if e.Size > 0 {
				b.size = e.Size
			}
			c.check(b)
		}
	case Removed:
		if b := c.blocks[e.Key]; b != nil {
			b.removeHolder(e.Node, index.TierMask(0).With(int(e.Tier)))
			c.check(b)
		}
	case NodeUp:
		c.nodeUp(e)
	case NodeDown:
		c.nodeDown(e.Node)
	case SetReplicas:
		b := c.blocks[e.Key]
		if b == nil && e.Count == 1 {
			return nil // the default: nothing to remember
		}
		if b == nil {
			b = c.track(e.Key)
		}
		b.desired = uint8(e.Count)
		if e.Count == 1 {
			b.desired = 0
		}
		c.check(b)
	case Pin:
		b := c.blocks[e.Key]
		if e.Until.IsZero() {
			if b != nil {
				b.pinnedUntil = 0
			}
			return nil
		}
		if b == nil {
			b = c.track(e.Key)
		}
		b.pinnedUntil = e.Until.UnixNano()
		c.check(b)
	case Pressure:
		c.nodes[e.Node].pressure = e.Bytes
		c.nodes[e.Node].toFree = e.Bytes
	case Done:
		if o := c.ops[e.ID]; o != nil {
			c.finish(o, e.Err)
		}
	}
	return nil
}

func (c *Core) validate(ev Event) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidEvent}, args...)...)
	}
	tier := func(t uint8) error {
		if t >= index.MaxTiers {
			return bad("tier %d, MaxTiers %d", t, index.MaxTiers)
		}
		return nil
	}
	switch e := ev.(type) {
	case Hits:
		if e.Counts != nil && len(e.Counts) != len(e.Keys) {
			return bad("%d counts for %d keys", len(e.Counts), len(e.Keys))
		}
		return c.checkNode(e.Node)
	case Added:
		if e.Size < 0 {
			return bad("size %d", e.Size)
		}
		if err := tier(e.Tier); err != nil {
			return err
		}
		return c.checkNode(e.Node)
	case Removed:
		if err := tier(e.Tier); err != nil {
			return err
		}
		return c.checkNode(e.Node)
	case NodeUp:
		if e.Capacity < 0 || e.Free < 0 || math.IsNaN(e.Load) || e.Load < 0 {
			return bad("node %d: capacity %d, free %d, load %v", e.Node, e.Capacity, e.Free, e.Load)
		}
		return c.checkNode(e.Node)
	case NodeDown:
		return c.checkNode(e.Node)
	case Pressure:
		if e.Bytes < 0 {
			return bad("pressure of %d bytes", e.Bytes)
		}
		return c.checkNode(e.Node)
	case SetReplicas:
		if e.Count < 1 || e.Count > 255 {
			return bad("replica count %d, want [1, 255]", e.Count)
		}
	case Pin, Done:
	default:
		return bad("%T", ev)
	}
	return nil
}

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

func (c *Core) nodeUp(e NodeUp) {
	n := &c.nodes[e.Node]
	n.capacity, n.free, n.load = e.Capacity, e.Free, e.Load
	if n.up {
		return
	}
	n.up = true
	c.up++
	// The node may hold tracked blocks (it restarted with its SSD, or
	// flapped), and blocks capped by the number of nodes may now grow.
	for _, b := range c.tracked {
		if c.loc != nil {
			if tiers := c.loc.NodeTiers(e.Node, b.key); tiers != 0 {
				b.addHolder(e.Node, tiers)
			}
		}
		c.check(b)
	}
	c.unpark(true)
}

func (c *Core) nodeDown(node uint32) {
	n := &c.nodes[node]
	if !n.up {
		return
	}
	n.up = false
	c.up--
	n.pressure, n.toFree = 0, 0
	for _, o := range slices.Clone(c.opq) {
		if !o.done && (o.node == node || (o.kind == Copy && o.from == node)) {
			c.finish(o, ErrNodeDown)
		}
	}
	for _, b := range c.tracked {
		if i := b.holderIndex(node); i >= 0 {
			b.holders = slices.Delete(b.holders, i, i+1)
			c.check(b)
		}
	}
}

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

// Top returns up to k blocks with heat windows, hottest first (ties by key),
// as of now: what a simulator samples for replica counts of the top keys, and
// what an operator's "hot blocks" page shows. Like Step, it moves the core's
// clock to now.
func (c *Core) Top(now time.Time, k int) []BlockStatus {
	c.advance(now)
	var hot []*blockState
	for _, b := range c.tracked {
		if b.hasWindow {
			hot = append(hot, b)
		}
	}
	cur, nb := c.bucket(), c.opts.Buckets
	slices.SortFunc(hot, func(x, y *blockState) int {
		if hx, hy := x.heat.sum(cur, nb), y.heat.sum(cur, nb); hx != hy {
			return cmp.Compare(hy, hx)
		}
		return bytes.Compare(x.key[:], y.key[:])
	})
	out := make([]BlockStatus, 0, min(k, len(hot)))
	for _, b := range hot[:min(k, len(hot))] {
		out = append(out, c.status(b))
	}
	return out
}

// Block returns what the core knows of k as of now, if it tracks it. Like
// Step, it moves the core's clock to now.
func (c *Core) Block(now time.Time, k block.Key) (BlockStatus, bool) {
	c.advance(now)
	b := c.blocks[k]
	if b == nil {
		return BlockStatus{}, false
	}
	return c.status(b), true
}

func (c *Core) status(b *blockState) BlockStatus {
	return BlockStatus{
		Key:      b.key,
		Heat:     c.heatOf(b),
		Replicas: c.live(b),
		Desired:  b.want(),
		Pinned:   b.pinnedUntil > c.now,
		InFlight: len(b.pending),
	}
}

// Stats returns the core's counters.
func (c *Core) Stats() Stats {
	s := c.stats
	s.Tracked, s.Hot, s.Queued, s.Parked, s.InFlight = len(c.tracked), c.hot, c.queue.Len(), len(c.parked), c.inflight
	// The struct, its tracked slot and its map entry (key, pointer and the
	// map's share of empty slots: 297 bytes per block measured in all).
	per := int64(unsafe.Sizeof(blockState{})) + 8 + 96
	s.MemoryBytes = c.sketch.bytes() + int64(len(c.tracked))*per
	for _, b := range c.tracked {
		s.MemoryBytes += int64(cap(b.holders))*int64(unsafe.Sizeof(holder{})) + int64(cap(b.pending))*int64(unsafe.Sizeof(pending{}))
	}
	return s
}

// wantQueue is a heap of blocks needing copies: pinned repairs, repairs, then
// hot blocks; by heat within a class, then by key.
type wantQueue []qitem

type qitem struct {
	b     *blockState
	class int
	heat  uint32
}

func (q wantQueue) Len() int { return len(q) }
func (q wantQueue) Less(i, j int) bool {
	if q[i].class != q[j].class {
		return q[i].class < q[j].class
	}
	if q[i].heat != q[j].heat {
		return q[i].heat > q[j].heat
	}
	return bytes.Compare(q[i].b.key[:], q[j].b.key[:]) < 0
}
func (q wantQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *wantQueue) Push(x any)   { *q = append(*q, x.(qitem)) }
func (q *wantQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = qitem{}
	*q = old[:len(old)-1]
	return it
}
