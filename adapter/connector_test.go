package adapter_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/internal/servetest"
)

const ns = "acme/sim"

// testLayout is small so tests move little: 8 layers of 16 tokens x 64
// bytes (1 KiB per layer of a block).
var testLayout = adapter.Layout{Name: "test", Layers: 8, KVHeads: 2, HeadDim: 8, DTypeBytes: 2, BlockTokens: 16}

// fill writes the deterministic KV of layer l of the block keyed k: what a
// model would compute from the tokens the key covers.
func fill(dst []byte, k block.Key, l int) {
	x := binary.LittleEndian.Uint64(k[:8]) ^ uint64(l+1)*0x9e3779b97f4a7c15
	for i := 0; i+8 <= len(dst); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(dst[i:], x)
	}
}

// pool is a target and source over plain memory: block b's layer l at
// (b*layers + l) * layerBytes.
type pool struct {
	layout adapter.Layout
	mem    []byte
	// before, when set, runs as Load asks for a region.
	before func(blk, layer int)
}

func newPool(blocks int) *pool {
	return &pool{layout: testLayout, mem: make([]byte, int64(blocks)*testLayout.BlockBytes())}
}

func (p *pool) Region(blk, layer int) []byte {
	if p.before != nil {
		p.before(blk, layer)
	}
	n := p.layout.LayerBytes()
	off := (int64(blk)*int64(p.layout.Layers) + int64(layer)) * n
	return p.mem[off : off+n]
}

func (p *pool) CopyLayer(blk, layer int, dst []byte) error {
	copy(dst, p.Region(blk, layer))
	return nil
}

// computed is a pool holding the true KV of keys, as a prefill leaves it.
func computed(keys []block.Key) *pool {
	p := newPool(len(keys))
	for b, k := range keys {
		for l := range testLayout.Layers {
			fill(p.Region(b, l), k, l)
		}
	}
	return p
}

// checkLayer fails unless the first n blocks of layer l in p are the true KV.
func checkLayer(t *testing.T, p *pool, keys []block.Key, l, n int) {
	t.Helper()
	want := make([]byte, testLayout.LayerBytes())
	for b := range n {
		fill(want, keys[b], l)
		if !bytes.Equal(p.Region(b, l), want) {
			t.Fatalf("block %d layer %d: wrong KV", b, l)
		}
	}
}

func tokens(seed, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(seed*100003 + i)
	}
	return t
}

func connector(t *testing.T, url string, mod func(*adapter.Options)) *adapter.Connector {
	t.Helper()
	cl, err := client.New(url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := adapter.Options{Client: cl, Namespace: ns, Layout: testLayout}
	if mod != nil {
		mod(&o)
	}
	c, err := adapter.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

// store saves every block of toks as an engine's prefill would and waits
// for the saves to land.
func store(t *testing.T, c *adapter.Connector, toks []uint32) adapter.Plan {
	t.Helper()
	ctx := t.Context()
	plan, err := c.Lookup(ctx, toks)
	if err != nil {
		t.Fatal(err)
	}
	src := computed(plan.Keys)
	sv := c.Save(plan)
	for l := range testLayout.Layers {
		if !sv.Layer(l, src) {
			t.Fatalf("layer %d dropped", l)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return plan
}

func TestOptionsValidate(t *testing.T) {
	_, err := adapter.New(adapter.Options{Namespace: "no slash", Layout: adapter.Layout{}, LoadDepth: -1})
	if !errors.Is(err, adapter.ErrInvalid) {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{"Client", "Namespace", "Layers", "LoadDepth"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

// transports are the ways a connector reaches a node on its host: shared
// memory (the default), HTTP by choice, and HTTP because the node has shared
// memory off.
var transports = []struct {
	name string
	args []string // of the node
	off  bool     // Options.DisableShm
	shm  bool     // whether shared memory is expected
}{
	{"shm", nil, false, true},
	{"http", nil, true, false},
	{"http-fallback", []string{"--shm-listen", ""}, false, false},
}

func TestSaveLookupLoad(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testSaveLookupLoad(t, tr.args, tr.off, tr.shm) })
	}
}

func testSaveLookupLoad(t *testing.T, args []string, noShm, shm bool) {
	_, url := servetest.Serve(t, args...)
	c := connector(t, url, func(o *adapter.Options) { o.DisableShm = noShm })
	ctx := t.Context()
	toks := tokens(1, 5*16+7) // five full blocks and a partial one

	plan := store(t, c, toks)
	if plan.HitBlocks != 0 || len(plan.Keys) != 5 {
		t.Fatalf("cold plan: %+v", plan)
	}
	if s := c.Stats(); s.Committed != 5 || s.SavedLayers != 5*8 || s.Dropped != 0 {
		t.Fatalf("stats after save: %+v", s)
	}

	// A longer prompt sharing the prefix hits the five blocks.
	longer := append(append([]uint32{}, toks[:80]...), tokens(2, 32)...)
	plan, err := c.Lookup(ctx, longer)
	if err != nil {
		t.Fatal(err)
	}
	if plan.HitBlocks != 5 || plan.HitTokens(testLayout) != 80 || len(plan.Keys) != 7 {
		t.Fatalf("warm plan: %+v", plan)
	}
	for i, tier := range plan.Tiers {
		if tier != "dram" {
			t.Errorf("block %d on %q", i, tier)
		}
	}
	dst := newPool(len(plan.Keys))
	ld := c.Load(ctx, plan, dst)
	for l := range testLayout.Layers {
		n, err := ld.Wait(ctx, l)
		if err != nil || n != 5 {
			t.Fatalf("layer %d: %d blocks, %v", l, n, err)
		}
		checkLayer(t, dst, plan.Keys, l, 5)
	}
	res, err := ld.Result(ctx)
	if err != nil || res.Err != nil || res.Blocks != 5 || res.Bytes != 5*testLayout.BlockBytes() {
		t.Fatalf("result %+v, %v", res, err)
	}

	// One layer of one block can be read alone: a ranged GET of its group.
	key, off := testLayout.LayerAt(plan.Keys[3], 5)
	cl, _ := client.New(url, client.Options{})
	r, err := cl.Open(ctx, key, client.GetOptions{Offset: off, Length: testLayout.LayerBytes()})
	if err != nil {
		t.Fatal(err)
	}
	one, err := io.ReadAll(r)
	r.Close()
	want := make([]byte, testLayout.LayerBytes())
	fill(want, plan.Keys[3], 5)
	if err != nil || !bytes.Equal(one, want) {
		t.Fatalf("ranged read of layer 5 of block 3: %d bytes, %v", len(one), err)
	}

	if s := c.Stats(); (s.ShmLoadRequests > 0) != shm || (s.ShmSaveRequests > 0) != shm {
		t.Fatalf("shared memory used %v, want %v: %+v", s.ShmLoadRequests > 0 || s.ShmSaveRequests > 0, shm, s)
	}

	// Saving the longer prompt stores only its two new blocks.
	sv := c.Save(plan)
	if got := sv.Blocks(); len(got) != 2 || got[0] != 5 || got[1] != 6 {
		t.Fatalf("save would store blocks %v", got)
	}
}

// Layers land a group at a time: every layer of group g is ready before any
// byte of group g+1 is written, and a layer is never ready before its group.
func TestLayerReadyBeforeNextArrives(t *testing.T) {
	_, url := servetest.Serve(t)
	// Groups in requests of their own, and all in one request (streamed
	// within the response); groups of one layer and of two.
	// A namespace holds one layout: each case has prompts of its own.
	for i, tc := range []struct{ depth, reqBytes, group int }{{1, 1, 1}, {4, 1, 1}, {1, 1 << 20, 1}, {4, 1 << 20, 1}, {1, 1, 2}, {4, 1 << 20, 2}, {4, 1 << 20, 3}} {
		depth := tc.depth
		layout := testLayout
		layout.GroupLayers = tc.group
		c := connector(t, url, func(o *adapter.Options) {
			o.LoadDepth, o.LoadRequestBytes, o.Layout = tc.depth, int64(tc.reqBytes), layout
		})
		store(t, c, tokens(30+i, 64))
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		plan, _ := c.Lookup(ctx, tokens(30+i, 64))
		dst := newPool(len(plan.Keys))
		// A group's first layer cannot be written until the test has
		// seen the previous group's last layer ready: if readiness waited
		// for later groups, this deadlocks and the context ends the test.
		gates := make([]chan struct{}, testLayout.Layers)
		for i := range gates {
			gates[i] = make(chan struct{})
		}
		dst.before = func(blk, layer int) {
			if first, _ := layout.GroupRange(layout.GroupOf(layer)); blk == 0 && layer > 0 && layer == first {
				select {
				case <-gates[layer-1]:
				case <-ctx.Done():
				}
			}
		}
		ld := c.Load(ctx, plan, dst)
		for l := range testLayout.Layers {
			n, err := ld.Wait(ctx, l)
			if err != nil || n != 4 {
				t.Fatalf("depth %d group %d layer %d: %d blocks, %v", depth, tc.group, l, n, err)
			}
			if l+1 < testLayout.Layers {
				if layout.GroupOf(l+1) == layout.GroupOf(l) {
					// Its group has landed: it becomes ready without
					// anything later (the next group's gate is shut).
					select {
					case <-ld.Ready(l + 1):
					case <-ctx.Done():
						t.Fatalf("depth %d group %d: layer %d of layer %d's group never ready", depth, tc.group, l+1, l)
					}
				} else {
					select {
					case <-ld.Ready(l + 1):
						t.Fatalf("depth %d group %d: layer %d ready before its group could be written", depth, tc.group, l+1)
					default:
					}
				}
			}
			checkLayer(t, dst, plan.Keys, l, 4)
			close(gates[l])
		}
		cancel()
	}
}

func TestMissingLayerShortensHit(t *testing.T) {
	_, url := servetest.Serve(t)
	c := connector(t, url, nil)
	ctx := t.Context()
	toks := tokens(4, 4*16)
	plan := store(t, c, toks)
	cl, _ := client.New(url, client.Options{})
	// Layer 5 of block 2 goes missing (evicted, lost with a node), and
	// the layers stored with it.
	key, _ := testLayout.LayerAt(plan.Keys[2], 5)
	if err := cl.Delete(ctx, key, ns); err != nil {
		t.Fatal(err)
	}
	plan, _ = c.Lookup(ctx, toks)
	if plan.HitBlocks != 4 {
		t.Fatalf("the commit records say 4 blocks, lookup says %d", plan.HitBlocks)
	}
	dst := newPool(4)
	ld := c.Load(ctx, plan, dst)
	res, _ := ld.Result(ctx)
	if res.Blocks != 2 || !errors.Is(res.Err, adapter.ErrShortLoad) {
		t.Fatalf("want a hit of 2 blocks and ErrShortLoad, got %d, %v", res.Blocks, res.Err)
	}
	for l := range testLayout.Layers {
		n, _ := ld.Wait(ctx, l)
		checkLayer(t, dst, plan.Keys, l, n)
	}
}

// The node dies while a load writes layer 3: what the load reports valid is
// the true KV, over shared memory as over HTTP.
func TestNodeKilledMidLoad(t *testing.T) {
	for _, tr := range transports[:2] {
		t.Run(tr.name, func(t *testing.T) { testNodeKilledMidLoad(t, tr.off, tr.shm) })
	}
}

func testNodeKilledMidLoad(t *testing.T, off, shm bool) {
	proc, url := servetest.Serve(t)
	// Groups of two layers, one group per request, so the kill falls
	// between requests.
	c := connector(t, url, func(o *adapter.Options) {
		o.LoadDepth, o.LoadRequestBytes, o.Layout.GroupLayers, o.DisableShm = 1, 1, 2, off
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	toks := tokens(5, 6*16)
	store(t, c, toks)
	plan, _ := c.Lookup(ctx, toks)
	dst := newPool(6)
	// Scribble over the target first: after the kill, whatever Load
	// reports valid must have been overwritten with the true KV.
	for i := range dst.mem {
		dst.mem[i] = 0xee
	}
	var once sync.Once
	var killed atomic.Bool
	dst.before = func(blk, layer int) {
		if layer == 3 {
			once.Do(func() { proc.Kill(); killed.Store(true) })
		}
	}
	ld := c.Load(ctx, plan, dst)
	res, err := ld.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !killed.Load() {
		t.Fatal("the node was never killed")
	}
	if s := c.Stats(); (s.ShmLoadRequests > 0) != shm {
		t.Fatalf("shared memory used %v, want %v", s.ShmLoadRequests > 0, shm)
	}
	if res.Blocks != 0 || !errors.Is(res.Err, adapter.ErrShortLoad) {
		t.Fatalf("after the kill: hit %d blocks, err %v; want 0 and ErrShortLoad", res.Blocks, res.Err)
	}
	for l := range testLayout.Layers {
		n, _ := ld.Wait(ctx, l)
		checkLayer(t, dst, plan.Keys, l, n)
		if l > 3 && n != 0 {
			t.Errorf("layer %d read %d blocks from a dead node", l, n)
		}
	}
	// The engine recomputes: the next lookup fails cleanly with an empty
	// plan, and saving to a dead node drops nothing silently.
	if p, err := c.Lookup(ctx, toks); err == nil || p.HitBlocks != 0 {
		t.Fatalf("lookup on a dead node: %+v, %v", p, err)
	}
}

func TestSaveDropsWhenStagingFull(t *testing.T) {
	_, url := servetest.Serve(t)
	// Staging for exactly one group of layers of one block; a request of
	// two new blocks never fits, so every layer is dropped, the engine is
	// never blocked, and nothing is committed.
	c := connector(t, url, func(o *adapter.Options) { o.SaveStagingBytes = testLayout.GroupBytes(0) })
	ctx := t.Context()
	toks := tokens(6, 32)
	plan, err := c.Lookup(ctx, toks)
	if err != nil {
		t.Fatal(err)
	}
	sv := c.Save(plan)
	src := computed(plan.Keys)
	for l := range testLayout.Layers {
		if sv.Layer(l, src) {
			t.Fatalf("layer %d was queued beyond the staging budget", l)
		}
	}
	c.Flush(ctx)
	if s := c.Stats(); s.Dropped != int64(testLayout.Layers) || s.Committed != 0 {
		t.Fatalf("stats %+v", s)
	}
	if p, _ := c.Lookup(ctx, toks); p.HitBlocks != 0 {
		t.Fatalf("dropped blocks were committed: %+v", p)
	}
	// One dropped layer of a block keeps it uncommitted even when the
	// others are stored.
	c2 := connector(t, url, nil)
	plan, _ = c2.Lookup(ctx, tokens(7, 16))
	sv = c2.Save(plan)
	for l := range testLayout.Layers {
		if l == 2 {
			sv.Layer(99, src) // an invalid layer drops, as a full queue would
			continue
		}
		sv.Layer(l, src)
	}
	c2.Flush(ctx)
	if p, _ := c2.Lookup(ctx, tokens(7, 16)); p.HitBlocks != 0 {
		t.Fatalf("a block missing a layer was committed: %+v", p)
	}
}

func TestLookupWarmsSSD(t *testing.T) {
	dir := t.TempDir()
	proc, url := servetest.Serve(t, "--data-dir", dir)
	c := connector(t, url, nil)
	toks := tokens(8, 3*16)
	store(t, c, toks)
	// A graceful stop writes DRAM to SSD; the restarted node has the
	// blocks on SSD only.
	proc.Stop(t)
	_, url = servetest.Serve(t, "--data-dir", dir)
	c = connector(t, url, nil)
	ctx := t.Context()
	plan, err := c.Lookup(ctx, toks)
	if err != nil {
		t.Fatal(err)
	}
	if plan.HitBlocks != 3 || plan.Tiers[0] != "ssd" {
		t.Fatalf("after restart: %+v", plan)
	}
	deadline := time.Now().Add(60 * time.Second)
	for c.Stats().Warmed < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := c.Stats(); s.Warmed != 3 || s.WarmFailed != 0 {
		t.Fatalf("warm stats %+v", s)
	}
	dst := newPool(3)
	res, _ := c.Load(ctx, plan, dst).Result(ctx)
	if res.Blocks != 3 {
		t.Fatalf("load after warm: %+v", res)
	}
	for l := range testLayout.Layers {
		checkLayer(t, dst, plan.Keys, l, 3)
	}
}

// Prefill/decode disaggregation: the decode side reads a group of layers as
// soon as the prefill side stored it, while the prefill has not produced the
// next layer yet.
func TestLoadStreamFollowsSave(t *testing.T) {
	_, url := servetest.Serve(t)
	layout := testLayout
	layout.GroupLayers = 3 // groups of layers 0-2, 3-5, 6-7
	prefill := connector(t, url, func(o *adapter.Options) { o.Layout = layout })
	decode := connector(t, url, func(o *adapter.Options) { o.Layout = layout })
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	toks := tokens(9, 3*16)
	plan, err := prefill.Lookup(ctx, toks)
	if err != nil {
		t.Fatal(err)
	}
	src := computed(plan.Keys)
	sv := prefill.Save(plan)
	dst := newPool(3)
	ld := decode.LoadStream(ctx, plan.Keys, dst, func(ctx context.Context, l int) error {
		select {
		case <-sv.Stored(l):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	for l := range testLayout.Layers {
		sv.Layer(l, src)
		first, end := layout.GroupRange(layout.GroupOf(l))
		if l < end-1 {
			// The group is not all computed: nothing of it can be there.
			select {
			case <-ld.Ready(l):
				t.Fatalf("layer %d ready before its group was saved", l)
			default:
			}
			continue
		}
		// The next layer is computed only once the decode side has this
		// group: streaming, not a transfer after the prefill.
		for k := first; k < end; k++ {
			n, err := ld.Wait(ctx, k)
			if err != nil || n != 3 {
				t.Fatalf("layer %d: %d blocks, %v", k, n, err)
			}
			checkLayer(t, dst, plan.Keys, k, 3)
		}
	}
	prefill.Flush(ctx)
	if p, _ := decode.Lookup(ctx, toks); p.HitBlocks != 3 {
		t.Fatalf("the streamed blocks were not committed: %+v", p)
	}
}

// A group is stored only with every one of its layers, in order: a layer
// skipped drops its group (the others are stored), the block is never
// committed, and the dropped group still reports stored so a streaming
// reader is not left waiting.
func TestSaveGroupNeedsEveryLayer(t *testing.T) {
	_, url := servetest.Serve(t)
	c := connector(t, url, func(o *adapter.Options) { o.Layout.GroupLayers = 2 })
	ctx := t.Context()
	toks := tokens(10, 2*16)
	plan, err := c.Lookup(ctx, toks)
	if err != nil {
		t.Fatal(err)
	}
	src := computed(plan.Keys)
	sv := c.Save(plan)
	for l := range testLayout.Layers {
		if l == 2 {
			continue // group 1 is layers 2 and 3
		}
		queued := sv.Layer(l, src)
		if queued != (l != 3) {
			t.Fatalf("layer %d queued %v", l, queued)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for l := range testLayout.Layers {
		select {
		case <-sv.Stored(l):
		case <-time.After(30 * time.Second):
			t.Fatalf("layer %d never reported stored", l)
		}
	}
	if !sv.Broken() {
		t.Fatal("a save missing a layer is not broken")
	}
	if s := c.Stats(); s.Committed != 0 || s.SavedLayers != 2*6 {
		t.Fatalf("stats %+v: want nothing committed, 3 groups of 2 blocks stored", s)
	}
	if p, _ := c.Lookup(ctx, toks); p.HitBlocks != 0 {
		t.Fatalf("blocks missing a group were committed: %+v", p)
	}
}
