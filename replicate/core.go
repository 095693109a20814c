package replicate

import (
	"bytes"
	"cmp"
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
// case the core learns holders only from Added events of tracked blocks.
// Zero options get their defaults; invalid ones are an error wrapping
// ErrOptions.
func NewCore(opts Options, loc Locations) (*Core, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
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
	return c, nil
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
