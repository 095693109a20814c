package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
)

// Target is where a Load puts the KV: the engine's registered memory (its
// paged pool, or a pinned staging buffer it copies to the device).
type Target interface {
	// Region returns the LayerBytes-long memory of layer layer of the
	// plan's block blk. Load writes it once, from one goroutine at a
	// time; the engine must not read it before Wait says the layer is
	// ready.
	Region(blk, layer int) []byte
}

// RegisteredTarget is the optional capability of a Target whose memory is
// a region the node on this host can map itself (client.Region: a sealed
// memfd, such as hbmsim's device memory or a Staging from
// NewRegionStaging). A Load through shared memory then has the node write
// each group of each block straight into it: no staging segment, no copy
// on the engine's side, only the CRC-32C read of what landed. A request
// whose groups do not each lie in one contiguous range of one region, or
// a node that will not map the region, goes through the segment instead.
type RegisteredTarget interface {
	Target
	// RegionOf returns the region holding layer layer of block blk and
	// the offset of Region(blk, layer) in it; ok is false where that
	// memory is not in a region.
	RegionOf(blk, layer int) (r client.Region, off int64, ok bool)
}

// Load is a layer-by-layer transfer in progress. Its methods are safe for
// concurrent use.
type Load struct {
	c      *Connector
	plan   Plan
	dst    Target
	start  time.Time
	layers []layerLoad
	// valid is the fewest valid blocks over the layers done so far: later
	// layers ask for no more than that, since a block is usable only with
	// all its layers.
	valid atomic.Int64
	next  atomic.Int64
	per   int // groups per request
	gate  func(ctx context.Context, layer int) error
	wg    sync.WaitGroup
	done  chan struct{}
}

// maxFrames keeps a multi-get under the server's default key limit (4096).
const maxFrames = 4096

type layerLoad struct {
	ready  chan struct{}
	blocks int
	err    error
	at     time.Duration
}

// Load moves the plan's hit blocks into dst, a group of layers at a time
// (Layout.GroupLayers), up to Options.LoadDepth requests at once. It returns
// at once; Wait(l) returns when layer l has landed: every layer of a group
// lands with its group. An empty plan loads nothing and every layer is ready
// with zero blocks. ctx bounds the whole transfer.
func (c *Connector) Load(ctx context.Context, plan Plan, dst Target) *Load {
	return c.load(ctx, plan, dst, nil)
}

// LoadStream loads the blocks keyed keys, group by group, as a producer
// stores them: before reading a group it waits for gate(ctx, l) for the
// group's last layer l, which returns once the producer's group is stored (a prefill instance's
// Save.Stored, relayed). This is prefill/decode disaggregation: the decode
// side's transfer runs behind the prefill's compute instead of after it.
// The blocks need no commit record; a gate error ends the layer with no
// valid blocks.
func (c *Connector) LoadStream(ctx context.Context, keys []block.Key, dst Target, gate func(ctx context.Context, layer int) error) *Load {
	return c.load(ctx, Plan{Keys: keys, HitBlocks: len(keys)}, dst, gate)
}

func (c *Connector) load(ctx context.Context, plan Plan, dst Target, gate func(context.Context, int) error) *Load {
	ld := &Load{c: c, plan: plan, dst: dst, gate: gate, start: time.Now(), layers: make([]layerLoad, c.layout.Layers), done: make(chan struct{})}
	for i := range ld.layers {
		ld.layers[i].ready = make(chan struct{})
	}
	ld.valid.Store(int64(plan.HitBlocks))
	ld.per = 1
	groups := c.layout.Groups()
	if gate == nil && plan.HitBlocks > 0 {
		// Enough groups per request to carry about LoadRequestBytes, and
		// no more frames than a batch may have.
		per := int64(plan.HitBlocks) * c.layout.GroupBytes(0)
		ld.per = int(max(1, min(c.opts.LoadRequestBytes/per, int64(maxFrames/plan.HitBlocks), int64(groups))))
	}
	c.st.loads.Add(1)
	if plan.HitBlocks == 0 || c.closed.Load() {
		for i := range ld.layers {
			close(ld.layers[i].ready)
		}
		close(ld.done)
		return ld
	}
	// Each worker takes the next groups in order, so a layer never waits
	// behind more than LoadDepth requests.
	for range min(c.opts.LoadDepth, (groups+ld.per-1)/ld.per) {
		ld.wg.Go(func() { ld.work(ctx) })
	}
	go func() {
		ld.wg.Wait()
		close(ld.done)
	}()
	return ld
}

func (ld *Load) work(ctx context.Context) {
	groups := ld.c.layout.Groups()
	for {
		g0 := int(ld.next.Add(int64(ld.per)) - int64(ld.per))
		if g0 >= groups {
			return
		}
		ld.loadGroups(ctx, g0, min(g0+ld.per, groups))
	}
}

// finishGroup records the outcome of every layer of group g.
func (ld *Load) finishGroup(g, blocks int, err error) {
	first, end := ld.c.layout.GroupRange(g)
	for l := first; l < end; l++ {
		ld.finishLayer(l, blocks, err)
	}
}

// finishLayer records layer l's outcome and signals it.
func (ld *Load) finishLayer(l, blocks int, err error) {
	ll := &ld.layers[l]
	ll.blocks, ll.err, ll.at = blocks, err, time.Since(ld.start)
	for {
		v := ld.valid.Load()
		if int64(blocks) >= v || ld.valid.CompareAndSwap(v, int64(blocks)) {
			break
		}
	}
	c := ld.c
	c.st.loadedBytes.Add(int64(blocks) * c.layout.LayerBytes())
	c.st.loadedLayers.Add(1)
	if err != nil {
		c.st.shortLayers.Add(1)
	}
	close(ll.ready)
}

// loadGroups reads groups [g0, g1) of the blocks still valid with one
// multi-get, group-major, straight from the response into dst: a frame is
// one group of one block, its layers written one after another into their
// regions. Frames come in order and each is verified before the next is
// handed over, so group g is signalled as soon as the first frame of group
// g+1 starts: the engine gets it while the rest of the response is still on
// the wire.
func (ld *Load) loadGroups(ctx context.Context, g0, g1 int) {
	c := ld.c
	n := int(ld.valid.Load())
	if n == 0 {
		for g := g0; g < g1; g++ {
			ld.finishGroup(g, 0, nil)
		}
		return
	}
	if ld.gate != nil {
		// A gated load moves one group per request: each waits for its
		// producer to have stored the group's last layer.
		_, end := c.layout.GroupRange(g0)
		if err := ld.gate(ctx, end-1); err != nil {
			ld.finishGroup(g0, 0, fmt.Errorf("%w: group %d: waiting for the producer: %w", ErrShortLoad, g0, err))
			return
		}
	}
	keys := make([]block.Key, 0, n*(g1-g0))
	fp := c.layout.fingerprint()
	for g := g0; g < g1; g++ {
		for i := range n {
			keys = append(keys, c.layout.groupKey(fp, ld.plan.Keys[i], g))
		}
	}
	lb := c.layout.LayerBytes()
	cur := g0        // the group whose frames are arriving
	valid := n       // its leading whole blocks so far
	frame := 0       // frames handed over
	next := func() { // group cur is complete
		var err error
		if valid < n {
			err = fmt.Errorf("%w: group %d: %d of %d blocks", ErrShortLoad, cur, valid, n)
		}
		ld.finishGroup(cur, valid, err)
		cur++
		valid = n
	}
	// frameOK does the bookkeeping of frame f, the next in order, and
	// says whether its bytes are wanted: frames of blocks after an invalid
	// one are not.
	frameOK := func(f client.Frame) (g, b int, ok bool) {
		g, b = g0+frame/n, frame%n
		frame++
		for cur < g {
			next()
		}
		if b >= valid {
			return g, b, false // an earlier block of this group is missing
		}
		if f.Missing || f.Length != c.layout.GroupBytes(g) {
			valid = b
			return g, b, false
		}
		return g, b, true
	}
	var err error
	direct := false
	if rt, ok := ld.dst.(RegisteredTarget); ok {
		if items := ld.regionItems(rt, keys, g0, n); items != nil {
			// The node writes every frame into the target before
			// answering; a frame found missing or short afterwards leaves
			// its block (and those after it) to the engine, which
			// recomputes them anyway.
			direct, err = c.getInto(ctx, items, func(_ int, f client.Frame) error {
				frameOK(f)
				return nil
			})
		}
	}
	if !direct {
		err = c.getBatch(ctx, keys, func(i int) int64 { return c.layout.GroupBytes(g0 + i/n) }, func(f client.Frame, r io.Reader) error {
			g, b, ok := frameOK(f)
			if !ok {
				return nil
			}
			first, end := c.layout.GroupRange(g)
			for l := first; l < end; l++ {
				dst := ld.dst.Region(b, l)
				if int64(len(dst)) != lb {
					panic(fmt.Sprintf("BUG: target region of block %d layer %d is %d bytes, layout says %d", b, l, len(dst), lb))
				}
				if _, err := io.ReadFull(r, dst); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err == nil {
		for cur < g1 {
			next()
		}
		return
	}
	// The frame being read when the error came may be partial or corrupt;
	// the ones before it were verified before it was handed over.
	if frame == 0 {
		valid = 0
	} else {
		valid = min(valid, (frame-1)%n)
	}
	err = fmt.Errorf("%w: group %d: %d of %d blocks: %w", ErrShortLoad, cur, valid, n, err)
	ld.finishGroup(cur, valid, err)
	for g := cur + 1; g < g1; g++ {
		ld.finishGroup(g, 0, fmt.Errorf("%w: group %d: %w", ErrShortLoad, g, err))
	}
}

// regionItems returns keys' frames (group-major, n blocks a group, from
// group g0) as ranges of rt's regions, or nil when some group of some block
// is not one contiguous range of one region.
func (ld *Load) regionItems(rt RegisteredTarget, keys []block.Key, g0, n int) []client.RegionItem {
	lb := ld.c.layout.LayerBytes()
	items := make([]client.RegionItem, len(keys))
	for i, k := range keys {
		g, b := g0+i/n, i%n
		first, end := ld.c.layout.GroupRange(g)
		r, off, ok := rt.RegionOf(b, first)
		if !ok {
			return nil
		}
		for l := first + 1; l < end; l++ {
			if r2, off2, ok := rt.RegionOf(b, l); !ok || r2 != r || off2 != off+int64(l-first)*lb {
				return nil
			}
		}
		items[i] = client.RegionItem{Key: k, Region: r, Offset: off, Length: int64(end-first) * lb}
	}
	return items
}

// Wait blocks until layer l has landed (or ctx ends) and returns how many
// leading blocks of the plan are valid in it. Fewer than planned comes with
// an error wrapping ErrShortLoad; the blocks it counts are still good.
func (ld *Load) Wait(ctx context.Context, l int) (int, error) {
	if l < 0 || l >= len(ld.layers) {
		return 0, fmt.Errorf("%w: layer %d of %d", ErrInvalid, l, len(ld.layers))
	}
	ll := &ld.layers[l]
	select {
	case <-ll.ready:
		return ll.blocks, ll.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Ready returns a channel closed when layer l has landed.
func (ld *Load) Ready(l int) <-chan struct{} { return ld.layers[l].ready }

// LoadResult sums up a finished Load.
type LoadResult struct {
	// Blocks is how many leading blocks are valid in every layer: the hit
	// the engine may use. Fewer than planned means a failure cut it short.
	Blocks int
	// Bytes moved into the target, over all layers.
	Bytes int64
	// LayerReady is when each layer landed, since Load was called.
	LayerReady []time.Duration
	Err        error
}

// Result waits for every layer and returns the outcome.
func (ld *Load) Result(ctx context.Context) (LoadResult, error) {
	select {
	case <-ld.done:
	case <-ctx.Done():
		return LoadResult{}, ctx.Err()
	}
	r := LoadResult{Blocks: ld.plan.HitBlocks, LayerReady: make([]time.Duration, len(ld.layers))}
	var errs []error
	for i := range ld.layers {
		ll := &ld.layers[i]
		r.Blocks = min(r.Blocks, ll.blocks)
		r.Bytes += int64(ll.blocks) * ld.c.layout.LayerBytes()
		r.LayerReady[i] = ll.at
		if ll.err != nil {
			errs = append(errs, ll.err)
		}
	}
	r.Err = errors.Join(errs...)
	return r, nil
}
