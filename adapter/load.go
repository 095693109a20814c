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
	gate  func(ctx context.Context, layer int) error
	wg    sync.WaitGroup
	done  chan struct{}
}

type layerLoad struct {
	ready  chan struct{}
	blocks int
	err    error
	at     time.Duration
}

// errStop ends a layer's multi-get at a block that is missing or of the
// wrong size.
var errStop = errors.New("adapter: stop")

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
	c.st.loads.Add(1)
	if plan.HitBlocks == 0 || c.closed.Load() {
		for i := range ld.layers {
			close(ld.layers[i].ready)
		}
		close(ld.done)
		return ld
	}
	// Each worker takes the next layer in order, so layer l never waits
	// behind layer l+k's bytes for more than LoadDepth layers.
	for range min(c.opts.LoadDepth, len(ld.layers)) {
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
		l := int(ld.next.Add(1) - 1)
		if l >= len(ld.layers) {
			return
		}
		ll := &ld.layers[l]
		ll.blocks, ll.err = ld.loadLayer(ctx, l, int(ld.valid.Load()))
		ll.at = time.Since(ld.start)
		for {
			v := ld.valid.Load()
			if int64(ll.blocks) >= v || ld.valid.CompareAndSwap(v, int64(ll.blocks)) {
				break
			}
		}
		close(ll.ready)
	}
}

// loadLayer reads layer l of the first n blocks with one multi-get, straight
// from the response into dst. It returns how many leading blocks arrived
// whole and verified.
func (ld *Load) loadLayer(ctx context.Context, l, n int) (int, error) {
	if n == 0 {
		return 0, nil
	}
	c := ld.c
	if ld.gate != nil {
		if err := ld.gate(ctx, l); err != nil {
			c.st.shortLayers.Add(1)
			return 0, fmt.Errorf("%w: layer %d: waiting for the producer: %w", ErrShortLoad, l, err)
		}
	}
	keys := make([]block.Key, n)
	for i := range n {
		keys[i] = c.layout.LayerKey(ld.plan.Keys[i], l)
	}
	want := c.layout.LayerBytes()
	started := 0
	err := c.cl.GetBatch(ctx, c.opts.Namespace, keys, func(f client.Frame, r io.Reader) error {
		if f.Missing || f.Length != want {
			return errStop
		}
		started++
		dst := ld.dst.Region(started-1, l)
		if int64(len(dst)) != want {
			panic(fmt.Sprintf("BUG: target region of block %d layer %d is %d bytes, layout says %d", started-1, l, len(dst), want))
		}
		_, err := io.ReadFull(r, dst)
		return err
	})
	valid := started
	switch {
	case err == nil:
	case errors.Is(err, errStop):
		err = nil
	default:
		// The frame being read when the error came may be partial or
		// corrupt; the ones before it were verified before it started.
		valid = max(started-1, 0)
	}
	c.st.loadedBytes.Add(int64(valid) * want)
	c.st.loadedLayers.Add(1)
	if valid < n || err != nil {
		c.st.shortLayers.Add(1)
		if err == nil {
			err = fmt.Errorf("%w: layer %d: %d of %d blocks", ErrShortLoad, l, valid, n)
		} else {
			err = fmt.Errorf("%w: layer %d: %d of %d blocks: %w", ErrShortLoad, l, valid, n, err)
		}
	}
	return valid, err
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
