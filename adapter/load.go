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
	group int // layers per request
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

// Load moves the plan's hit blocks into dst, layer by layer, up to
// Options.LoadDepth layers at once. It returns at once; Wait(l) returns when
// layer l has landed. An empty plan loads nothing and every layer is ready
// with zero blocks. ctx bounds the whole transfer.
func (c *Connector) Load(ctx context.Context, plan Plan, dst Target) *Load {
	return c.load(ctx, plan, dst, nil)
}

// LoadStream loads the blocks keyed keys, layer by layer, as a producer
// stores them: before reading layer l it waits for gate(ctx, l), which
// returns once the producer's layer is stored (a prefill instance's
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
	ld.group = 1
	if gate == nil && plan.HitBlocks > 0 {
		// Enough layers per request to carry about LoadRequestBytes, and
		// no more frames than a batch may have.
		per := int64(plan.HitBlocks) * c.layout.LayerBytes()
		ld.group = int(max(1, min(c.opts.LoadRequestBytes/per, int64(maxFrames/plan.HitBlocks), int64(c.layout.Layers))))
	}
	c.st.loads.Add(1)
	if plan.HitBlocks == 0 || c.closed.Load() {
		for i := range ld.layers {
			close(ld.layers[i].ready)
		}
		close(ld.done)
		return ld
	}
	// Each worker takes the next group of layers in order, so layer l
	// never waits behind more than LoadDepth requests.
	for range min(c.opts.LoadDepth, (len(ld.layers)+ld.group-1)/ld.group) {
		ld.wg.Go(func() { ld.work(ctx) })
	}
	go func() {
		ld.wg.Wait()
		close(ld.done)
	}()
	return ld
}

func (ld *Load) work(ctx context.Context) {
	for {
		l0 := int(ld.next.Add(int64(ld.group)) - int64(ld.group))
		if l0 >= len(ld.layers) {
			return
		}
		ld.loadGroup(ctx, l0, min(l0+ld.group, len(ld.layers)))
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

// loadGroup reads layers [l0, l1) of the blocks still valid with one
// multi-get, layer-major, straight from the response into dst. Frames come
// in order and each is verified before the next is handed over, so layer l
// is signalled as soon as the first frame of layer l+1 starts: the engine
// gets layer l while the rest of the response is still on the wire.
func (ld *Load) loadGroup(ctx context.Context, l0, l1 int) {
	c := ld.c
	n := int(ld.valid.Load())
	if n == 0 {
		for l := l0; l < l1; l++ {
			ld.finishLayer(l, 0, nil)
		}
		return
	}
	if ld.gate != nil {
		// A gated load moves one layer per request: each waits for its
		// producer.
		if err := ld.gate(ctx, l0); err != nil {
			ld.finishLayer(l0, 0, fmt.Errorf("%w: layer %d: waiting for the producer: %w", ErrShortLoad, l0, err))
			return
		}
	}
	keys := make([]block.Key, 0, n*(l1-l0))
	for l := l0; l < l1; l++ {
		for i := range n {
			keys = append(keys, c.layout.LayerKey(ld.plan.Keys[i], l))
		}
	}
	want := c.layout.LayerBytes()
	cur := l0        // the layer whose frames are arriving
	valid := n       // its leading whole blocks so far
	frame := 0       // frames handed over
	next := func() { // layer cur is complete
		var err error
		if valid < n {
			err = fmt.Errorf("%w: layer %d: %d of %d blocks", ErrShortLoad, cur, valid, n)
		}
		ld.finishLayer(cur, valid, err)
		cur++
		valid = n
	}
	err := c.cl.GetBatch(ctx, c.opts.Namespace, keys, func(f client.Frame, r io.Reader) error {
		l, b := l0+frame/n, frame%n
		frame++
		for cur < l {
			next()
		}
		if b >= valid {
			return nil // an earlier block of this layer is missing
		}
		if f.Missing || f.Length != want {
			valid = b
			return nil
		}
		dst := ld.dst.Region(b, l)
		if int64(len(dst)) != want {
			panic(fmt.Sprintf("BUG: target region of block %d layer %d is %d bytes, layout says %d", b, l, len(dst), want))
		}
		_, err := io.ReadFull(r, dst)
		return err
	})
	if err == nil {
		for cur < l1 {
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
	err = fmt.Errorf("%w: layer %d: %d of %d blocks: %w", ErrShortLoad, cur, valid, n, err)
	ld.finishLayer(cur, valid, err)
	for l := cur + 1; l < l1; l++ {
		ld.finishLayer(l, 0, fmt.Errorf("%w: layer %d: %w", ErrShortLoad, l, err))
	}
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
