package enginesim_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/adapter/hbmsim"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/enginesim"
	"github.com/yuebing/yuebing/internal/servetest"
)

const ns = "acme/sim"

// quiet drops the logs of failures the tests cause on purpose.
var quiet = slog.New(slog.DiscardHandler)

// layout: 8 layers, 32 tokens a block, 2 KiB a layer of a block, stored in
// 4 groups of 2 layers.
var layout = adapter.Layout{Name: "test", Layers: 8, KVHeads: 2, HeadDim: 8, DTypeBytes: 2, BlockTokens: 32, GroupLayers: 2}

func prompt(seed, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(seed*7919 + i)
	}
	return t
}

func connector(t *testing.T, url string, mods ...func(*adapter.Options)) *adapter.Connector {
	t.Helper()
	cl, err := client.New(url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := adapter.Options{Client: cl, Namespace: ns, Layout: layout, Logger: quiet}
	for _, mod := range mods {
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

// engine starts an engine whose simulated compute is a thousandth of real
// time, so tests spend no time sleeping.
func engine(t *testing.T, mod func(*enginesim.Options)) *enginesim.Engine {
	t.Helper()
	// Loads are always taken unless a test says otherwise: the tests are
	// about what a load does, not whether it pays.
	o := enginesim.Options{Layout: layout, Namespace: ns, TimeScale: 0.001, PoolBlocks: 64, Logger: quiet, DisableLoadIfFaster: true}
	if mod != nil {
		mod(&o)
	}
	e, err := enginesim.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { e.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return e
}

func submit(t *testing.T, e *enginesim.Engine, toks []uint32, maxTokens int) enginesim.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := e.Submit(ctx, enginesim.Request{Tokens: toks, MaxTokens: maxTokens})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLocalPrefixCache(t *testing.T) {
	f := func(cache bool, wantLocal int) {
		t.Helper()
		e := engine(t, func(o *enginesim.Options) { o.DisablePrefixCache = !cache })
		p := prompt(1, 100) // three full blocks and 4 tokens
		first := submit(t, e, p, 3)
		if first.ComputedTokens != 100 || len(first.Output) != 3 {
			t.Fatalf("cold: %+v", first)
		}
		again := submit(t, e, append(p[:96:96], prompt(2, 40)...), 1)
		if again.LocalHitTokens != wantLocal || again.ComputedTokens != 136-wantLocal {
			t.Fatalf("cache %v: %+v", cache, again)
		}
	}
	f(true, 96)
	f(false, 0)
}

func TestPoolSharedAcrossEngines(t *testing.T) {
	_, url := servetest.Serve(t)
	ca, cb := connector(t, url), connector(t, url)
	a := engine(t, func(o *enginesim.Options) { o.Connector = ca })
	b := engine(t, func(o *enginesim.Options) { o.Connector = cb })
	p := prompt(3, 5*32+10)
	if r := submit(t, a, p, 2); r.ComputedTokens != len(p) || r.PoolHitTokens != 0 {
		t.Fatalf("cold on a: %+v", r)
	}
	if err := ca.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := submit(t, b, p, 2)
	if r.PoolHitTokens != 5*32 || r.ComputedTokens != 10 || r.TierTokens["dram"] != 5*32 || r.LoadBytes != 5*layout.BlockBytes() {
		t.Fatalf("b after a saved: %+v", r)
	}
	// Now b's own pool has it: the next request is a local hit, no load.
	if r := submit(t, b, p, 1); r.LocalHitTokens != 5*32 || r.PoolHitTokens != 0 {
		t.Fatalf("b again: %+v", r)
	}
	if s := b.Stats(); s.WrongKV != 0 || s.PoolHitTokens != 5*32 || s.PoolTierTokens["dram"] != 5*32 {
		t.Fatalf("b stats %+v", s)
	}
}

// With compute a billion times faster than real, no load can beat it: the
// first pool hit is loaded (nothing is known of loads yet) and teaches the
// engine their cost; the next is computed and counted as skipped.
func TestLoadIfFasterSkipsSlowLoads(t *testing.T) {
	_, url := servetest.Serve(t)
	ca, cb := connector(t, url), connector(t, url)
	a := engine(t, func(o *enginesim.Options) { o.Connector = ca })
	b := engine(t, func(o *enginesim.Options) {
		o.Connector, o.TimeScale, o.DisableLoadIfFaster = cb, 1e-9, false
	})
	p1, p2 := prompt(11, 5*32+3), prompt(12, 5*32+3)
	submit(t, a, p1, 1)
	submit(t, a, p2, 1)
	if err := ca.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := submit(t, b, p1, 1); r.PoolHitTokens != 5*32 || r.SkippedLoadTokens != 0 {
		t.Fatalf("first hit, nothing learnt yet: %+v", r)
	}
	if s := b.Stats(); s.LoadBytesPerSecond <= 0 {
		t.Fatalf("no load throughput learnt: %+v", s)
	}
	r := submit(t, b, p2, 1)
	if r.PoolHitTokens != 0 || r.SkippedLoadTokens != 5*32 || r.ComputedTokens != len(p2) || r.LoadBytes != 0 {
		t.Fatalf("second hit should be computed: %+v", r)
	}
	if s := b.Stats(); s.SkippedLoadTokens != 5*32 || s.WrongKV != 0 {
		t.Fatalf("b stats %+v", s)
	}
	var m strings.Builder
	if err := b.WriteMetrics(&m); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.String(), "enginesim_skipped_load_tokens_total 160\n") {
		t.Fatalf("metrics do not count the skipped tokens:\n%s", m.String())
	}
}

// killingDevice kills the yuebing node the first time the adapter writes into
// layer killAt of a page: mid-Load.
type killingDevice struct {
	*hbmsim.Device
	mu     sync.Mutex
	armed  bool
	kill   func()
	killed bool
}

func (d *killingDevice) PageMemory(p adapter.Page) []byte {
	d.mu.Lock()
	if d.armed && !d.killed {
		d.killed = true
		d.kill()
	}
	d.mu.Unlock()
	return d.Device.PageMemory(p)
}

func TestNodeKilledMidLoadEngineRecomputes(t *testing.T) {
	proc, url := servetest.Serve(t)
	// b loads one group per request, one request at a time, so the kill
	// falls between requests.
	ca, cb := connector(t, url), connector(t, url, func(o *adapter.Options) { o.LoadRequestBytes, o.LoadDepth = 1, 1 })
	a := engine(t, func(o *enginesim.Options) { o.Connector = ca })
	p := prompt(4, 6*32)
	submit(t, a, p, 1)
	ca.Flush(t.Context())

	dev, err := hbmsim.New(hbmsim.Options{PageBytes: int(layout.BlockBytes()), Pages: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	kd := &killingDevice{Device: dev, kill: proc.Kill}
	b := engine(t, func(o *enginesim.Options) { o.Connector = cb; o.Device = kd })
	kd.mu.Lock()
	kd.armed = true
	kd.mu.Unlock()
	r := submit(t, b, p, 1)
	if !kd.killed {
		t.Fatal("the load never started")
	}
	if r.PoolHitTokens+r.RecomputedTokens != 6*32 || r.RecomputedTokens == 0 {
		t.Fatalf("after the kill: %+v", r)
	}
	if s := b.Stats(); s.WrongKV != 0 {
		t.Fatalf("the engine used wrong KV: %+v", s)
	}
	// The prefix is in b's own pool now, with the right bytes: a second
	// request reads it locally.
	if r := submit(t, b, p, 1); r.LocalHitTokens != 6*32 {
		t.Fatalf("after recompute: %+v", r)
	}
}

func TestEvictionOffloads(t *testing.T) {
	_, url := servetest.Serve(t)
	// A staging budget of one block's group of layers drops every save at
	// prefill time (they are of 4 blocks); the blocks reach yuebing only
	// when the pool evicts them, one at a time.
	cl, _ := client.New(url, client.Options{})
	c, err := adapter.New(adapter.Options{Client: cl, Namespace: ns, Layout: layout, SaveStagingBytes: layout.GroupBytes(0), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	e := engine(t, func(o *enginesim.Options) { o.Connector = c; o.PoolBlocks = 4 })
	p1 := prompt(5, 4*32)
	submit(t, e, p1, 1) // 4 blocks, saves dropped: the staging holds one group of one block
	submit(t, e, prompt(6, 4*32), 1)
	c.Flush(t.Context())
	if s := e.Stats(); s.Offloaded == 0 {
		t.Fatalf("nothing offloaded: %+v", s)
	}
	plan, err := c.Lookup(t.Context(), p1)
	if err != nil || plan.HitBlocks == 0 {
		t.Fatalf("evicted blocks are not in yuebing: %+v %v", plan, err)
	}
}

func TestRejections(t *testing.T) {
	e, err := enginesim.New(enginesim.Options{Layout: layout, Namespace: ns, MaxWaiting: 1, PoolBlocks: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Not running: the first request waits, the second finds the queue full.
	if _, err := e.Start(enginesim.Request{Tokens: prompt(1, 10), MaxTokens: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(enginesim.Request{Tokens: prompt(1, 10), MaxTokens: 1}); !errors.Is(err, enginesim.ErrOverloaded) {
		t.Fatalf("full queue: %v", err)
	}
	if _, err := e.Start(enginesim.Request{Tokens: prompt(1, 3*32), MaxTokens: 1}); !errors.Is(err, enginesim.ErrTooLong) {
		t.Fatalf("three blocks in a pool of two: %v", err)
	}
	for _, r := range []enginesim.Request{{MaxTokens: 1}, {Tokens: []uint32{1}, MaxTokens: 0}} {
		if _, err := e.Start(r); !errors.Is(err, enginesim.ErrInvalid) {
			t.Errorf("%+v: %v", r, err)
		}
	}
}
