package enginesim

import (
	"github.com/yuebing/yuebing/kvevents"

	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/adapter/hbmsim"
	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/tokenizer"
)

// Request is one completion to run.
type Request struct {
	// Tokens is the prompt.
	Tokens []uint32
	// MaxTokens is how many tokens to generate, at least 1 (the first
	// comes out of the prefill).
	MaxTokens int
}

// Result is what a request cost and where its KV came from.
type Result struct {
	// Output is the generated tokens (deterministic from the prompt).
	Output []uint32
	// Queue is the wait before the prefill started; TTFT the time to the
	// first token, queue included; E2E to the last.
	Queue, TTFT, E2E time.Duration
	// PromptTokens = LocalHitTokens + PoolHitTokens + ComputedTokens.
	PromptTokens, LocalHitTokens, PoolHitTokens, ComputedTokens int
	// TierTokens counts pool-hit tokens by the tier yuebing held them in.
	TierTokens map[string]int
	// LoadBytes moved from yuebing; LoadTime from Load to its last layer;
	// LoadStall the part of it the prefill waited for (the rest was
	// hidden behind compute).
	LoadBytes           int64
	LoadTime, LoadStall time.Duration
	// RecomputedTokens were planned as a pool hit but failed to load
	// (node gone, missing layer) and were computed instead.
	RecomputedTokens int
	// SkippedLoadTokens were a pool hit the engine chose to compute
	// because loading them was estimated to take longer (LoadIfFaster);
	// they count in ComputedTokens.
	SkippedLoadTokens int
}

// Job is a request in the engine.
type Job struct {
	req     Request
	arrival time.Time
	out     chan uint32
	done    chan struct{}
	res     Result
	err     error

	keys    []block.Key
	refs    []block.Key    // cached blocks this job holds
	private []adapter.Page // pages not in the cache, freed at the end
	started time.Time
}

// Tokens streams the generated tokens; closed when the job ends.
func (j *Job) Tokens() <-chan uint32 { return j.out }

// Wait returns the job's result once it ends.
func (j *Job) Wait(ctx context.Context) (Result, error) {
	select {
	case <-j.done:
		return j.res, j.err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Engine is a simulated inference engine. Start and Submit are safe for
// concurrent use; Run is the engine's one scheduling loop.
type Engine struct {
	opts    Options
	layout  adapter.Layout
	dev     adapter.Device
	ownDev  *hbmsim.Device
	pool    *pool
	conn    *adapter.Connector
	wake    chan struct{}
	scratch []byte
	check   []byte
	mu      struct {
		sync.Mutex
		waiting []*Job
		stopped bool
		tiers   map[string]int64
	}
	running []*Job
	st      counters
	// loads learns the adapter's load time from the loads done; skipRun
	// counts the loads skipped in a row (the engine loop alone uses it).
	loads   loadModel
	skipRun int
	// tok and chats tokenize text prompts and chats (tokenize.go).
	tok   *tokenizer.Tokenizer
	chats *tokenizer.SegmentCache
}

type counters struct {
	requests, rejected, completed, failed                     atomic.Int64
	promptTokens, computedTokens, localHitTokens, poolHitToks atomic.Int64
	recomputed, wrongKV, offloaded, generated, skippedLoad    atomic.Int64
	loadBytes, loadNanos, stallNanos, ttftNanos               atomic.Int64
}

// New builds an engine; Run starts it.
func New(opts Options) (*Engine, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	tok, err := tokenizer.New(opts.Encoding)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	e := &Engine{opts: opts, layout: opts.Layout, dev: opts.Device, conn: opts.Connector, wake: make(chan struct{}, 1),
		tok: tok, chats: tokenizer.NewSegmentCache(opts.ChatCacheTokens)}
	if e.dev == nil {
		d, err := hbmsim.New(hbmsim.Options{PageBytes: int(opts.Layout.BlockBytes()), Pages: opts.PoolBlocks, Name: "hbmsim-" + opts.Name})
		if err != nil {
			return nil, err
		}
		e.dev, e.ownDev = d, d
	}
	e.pool = newPool(e.dev, !opts.DisablePrefixCache, e.offload)
	if opts.Events != nil {
		e.pool.dropped = e.publishRemoved
	}
	e.scratch = make([]byte, opts.Layout.LayerBytes())
	e.check = make([]byte, opts.Layout.LayerBytes())
	e.mu.tiers = map[string]int64{}
	return e, nil
}

// Options returns the engine's options, defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Start queues a request.
func (e *Engine) Start(req Request) (*Job, error) {
	if len(req.Tokens) == 0 {
		return nil, fmt.Errorf("%w: empty prompt", ErrInvalid)
	}
	if req.MaxTokens < 1 || req.MaxTokens > e.opts.MaxTokens {
		return nil, fmt.Errorf("%w: max_tokens %d not in [1, %d]", ErrInvalid, req.MaxTokens, e.opts.MaxTokens)
	}
	if blocks := len(req.Tokens) / e.layout.BlockTokens; blocks > e.dev.Pages() {
		return nil, fmt.Errorf("%w: %d blocks, the pool has %d pages", ErrTooLong, blocks, e.dev.Pages())
	}
	j := &Job{req: req, arrival: time.Now(), out: make(chan uint32, req.MaxTokens), done: make(chan struct{})}
	e.mu.Lock()
	switch {
	case e.mu.stopped:
		e.mu.Unlock()
		return nil, ErrStopped
	case len(e.mu.waiting) >= e.opts.MaxWaiting:
		e.mu.Unlock()
		e.st.rejected.Add(1)
		return nil, fmt.Errorf("%w: %d requests waiting", ErrOverloaded, len(e.mu.waiting))
	}
	e.mu.waiting = append(e.mu.waiting, j)
	e.mu.Unlock()
	e.st.requests.Add(1)
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return j, nil
}

// Submit runs a request to its end.
func (e *Engine) Submit(ctx context.Context, req Request) (Result, error) {
	j, err := e.Start(req)
	if err != nil {
		return Result{}, err
	}
	return j.Wait(ctx)
}

// Run is the engine loop: prefill waiting requests one at a time, then one
// decode step of the running batch, until ctx ends. Jobs left then fail with
// ErrStopped. It closes the device it made.
func (e *Engine) Run(ctx context.Context) error {
	defer e.stop()
	for ctx.Err() == nil {
		e.mu.Lock()
		var j *Job
		if len(e.mu.waiting) > 0 && len(e.running) < e.opts.MaxRunning {
			j = e.mu.waiting[0]
			e.mu.waiting = e.mu.waiting[1:]
		}
		e.mu.Unlock()
		if j == nil && len(e.running) == 0 {
			select {
			case <-e.wake:
			case <-ctx.Done():
			}
			continue
		}
		if j != nil {
			if !e.prefill(ctx, j) {
				// No pages until running requests finish: put it back in
				// front and decode.
				e.mu.Lock()
				e.mu.waiting = append([]*Job{j}, e.mu.waiting...)
				e.mu.Unlock()
				if len(e.running) == 0 {
					e.mu.Lock()
					e.mu.waiting = e.mu.waiting[1:]
					e.mu.Unlock()
					e.finish(j, fmt.Errorf("%w: not even an empty pool holds it", ErrTooLong))
				}
			}
		}
		if len(e.running) > 0 {
			e.decodeStep(ctx)
		}
	}
	return nil
}

func (e *Engine) stop() {
	e.mu.Lock()
	e.mu.stopped = true
	waiting := e.mu.waiting
	e.mu.waiting = nil
	e.mu.Unlock()
	for _, j := range append(waiting, e.running...) {
		e.finish(j, ErrStopped)
	}
	e.running = nil
	if e.ownDev != nil {
		e.ownDev.Close()
	}
}

// sleep spends simulated compute time d (already scaled).
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (e *Engine) prefillTime(n, p int) time.Duration {
	return time.Duration(e.opts.Prefill.Seconds(n, p) * e.opts.TimeScale * float64(time.Second))
}

// prefill runs j's prefill layer by layer: the cached prefix comes from the
// engine's pool and then from yuebing (loaded while earlier layers compute),
// the rest is computed and its KV written to the pool and saved to yuebing
// layer by layer. It reports false when the pool has no pages for it now.
func (e *Engine) prefill(ctx context.Context, j *Job) bool {
	L, bt, lb := e.layout.Layers, e.layout.BlockTokens, e.layout.LayerBytes()
	keys, err := block.ChainKeys(e.opts.Namespace, bt, j.req.Tokens)
	if err != nil {
		e.finish(j, fmt.Errorf("%w: %w", ErrInvalid, err))
		return true
	}
	j.keys = keys
	local := e.pool.match(keys)
	m := len(local)
	var plan adapter.Plan
	if e.conn != nil {
		plan, err = e.conn.Lookup(ctx, j.req.Tokens)
		if err != nil {
			e.opts.Logger.Debug("enginesim: lookup failed; computing", "err", err)
		}
	}
	pages := e.pool.alloc(len(keys) - m)
	if pages == nil && len(keys) > m {
		for _, k := range keys[:m] {
			e.pool.release(k)
		}
		return false
	}
	j.started = time.Now()
	j.res.Queue = j.started.Sub(j.arrival)
	all := append(local, pages...)
	hit := m
	poolHit := 0
	if plan.HitBlocks > m {
		if e.opts.DisableLoadIfFaster || e.loadPays(len(j.req.Tokens), m, plan.HitBlocks) {
			poolHit = plan.HitBlocks - m
			hit = plan.HitBlocks
			e.skipRun = 0
		} else {
			// Computing these blocks is faster than loading them; they
			// are stored already, so the save skips them.
			e.skipRun++
			j.res.SkippedLoadTokens = (plan.HitBlocks - m) * bt
			e.st.skippedLoad.Add(int64(j.res.SkippedLoadTokens))
		}
	}
	var ld *adapter.Load
	if poolHit > 0 {
		sub := adapter.Plan{Keys: keys[m:hit], HitBlocks: poolHit}
		ld = e.conn.Load(ctx, sub, pageTarget{e: e, pages: all[m:hit]})
	}
	var sv *adapter.Save
	if e.conn != nil && plan.Keys != nil {
		sv = e.conn.Save(plan)
	}
	n := len(j.req.Tokens)
	perLayer := e.prefillTime(n, hit*bt) / time.Duration(L)
	var stall time.Duration
	src := pageSource{e: e, pages: all}
	// A group of layers (Layout.GroupLayers: the unit loads land in and
	// saves are stored in) is computed in one stretch, ending perLayer
	// times its layers after the later of the previous group's end and
	// its KV's arrival: a deadline rather than a sleep per layer, so a
	// timer that fires late on a busy machine costs once per group, not
	// once per layer (80 late wake-ups would add more than the compute
	// they stand for).
	due := time.Now()
	for g := range e.layout.Groups() {
		first, end := e.layout.GroupRange(g)
		if ld != nil {
			t0 := time.Now()
			ld.Wait(ctx, first)
			if arrived := time.Now(); arrived.After(due) {
				from := due
				if t0.After(from) {
					from = t0
				}
				stall += arrived.Sub(from)
				due = arrived
			}
		}
		due = due.Add(perLayer * time.Duration(end-first))
		sleep(ctx, time.Until(due))
		for l := first; l < end; l++ {
			for b := hit; b < len(keys); b++ {
				Fill(e.scratch, keys[b], l)
				if err := e.dev.CopyIn(ctx, all[b], l*int(lb), e.scratch); err != nil {
					panic("BUG: enginesim: writing an allocated page: " + err.Error())
				}
			}
			if sv != nil {
				sv.Layer(l, src)
			}
		}
	}
	loaded := 0
	if ld != nil {
		res, _ := ld.Result(ctx)
		loaded = e.verify(ctx, keys[m:m+res.Blocks], all[m:m+res.Blocks])
		j.res.LoadBytes = int64(loaded) * e.layout.BlockBytes()
		// Groups of layers land concurrently: the load ends with the
		// last to land, whichever layer that is.
		for _, at := range res.LayerReady {
			j.res.LoadTime = max(j.res.LoadTime, at)
		}
		j.res.LoadStall = stall
		e.loads.add(int64(poolHit)*e.layout.BlockBytes(), j.res.LoadTime)
		if lost := poolHit - loaded; lost > 0 {
			// The rest of the planned hit is computed after all: the
			// layers already computed assumed it, so the cost is the
			// difference of the two prefills, and its KV is written.
			sleep(ctx, e.prefillTime(n, (m+loaded)*bt)-e.prefillTime(n, hit*bt))
			for b := m + loaded; b < hit; b++ {
				for l := range L {
					Fill(e.scratch, keys[b], l)
					e.dev.CopyIn(ctx, all[b], l*int(lb), e.scratch)
				}
			}
			j.res.RecomputedTokens = lost * bt
			e.st.recomputed.Add(int64(lost * bt))
			if e.conn != nil {
				sub := adapter.Plan{Keys: keys[m+loaded : hit]}
				rs := e.conn.Save(sub)
				for l := range L {
					rs.Layer(l, pageSource{e: e, pages: all[m+loaded : hit]})
				}
			}
		}
	}
	// Blocks of this prompt join the prefix cache (promotion into HBM of
	// what came from below, and what was computed).
	j.refs = append(j.refs, keys[:m]...)
	var stored []int
	for b := m; b < len(keys); b++ {
		saved := b < plan.HitBlocks || (b < len(plan.Stored) && plan.Stored[b]) || (sv != nil && !sv.Broken())
		if e.pool.insert(keys[b], all[b], saved || e.conn == nil) {
			j.refs = append(j.refs, keys[b])
			stored = append(stored, b)
		} else {
			j.private = append(j.private, all[b])
		}
	}
	if e.opts.Events != nil && len(stored) > 0 {
		e.publishStored(keys, stored, j.req.Tokens, bt)
	}
	now := time.Now()
	j.res.TTFT = now.Sub(j.arrival)
	j.res.PromptTokens = n
	j.res.LocalHitTokens = m * bt
	j.res.PoolHitTokens = loaded * bt
	j.res.ComputedTokens = n - (m+loaded)*bt
	if loaded > 0 {
		j.res.TierTokens = map[string]int{}
		for i := m; i < m+loaded; i++ {
			j.res.TierTokens[plan.Tiers[i]] += bt
		}
		e.mu.Lock()
		for t, v := range j.res.TierTokens {
			e.mu.tiers[t] += int64(v)
		}
		e.mu.Unlock()
	}
	e.st.promptTokens.Add(int64(n))
	e.st.localHitTokens.Add(int64(j.res.LocalHitTokens))
	e.st.poolHitToks.Add(int64(j.res.PoolHitTokens))
	e.st.computedTokens.Add(int64(j.res.ComputedTokens))
	e.st.loadBytes.Add(j.res.LoadBytes)
	e.st.loadNanos.Add(int64(j.res.LoadTime))
	e.st.stallNanos.Add(int64(j.res.LoadStall))
	e.st.ttftNanos.Add(int64(j.res.TTFT))
	e.emit(j)
	if len(j.res.Output) >= j.req.MaxTokens {
		e.finish(j, nil)
	} else {
		e.running = append(e.running, j)
	}
	return true
}

// verify checks loaded blocks against the KV their tokens imply and returns
// how many leading ones are right. The adapter checks every byte's CRC; this
// is the engine's own guard, and a wrong block is counted and recomputed.
func (e *Engine) verify(ctx context.Context, keys []block.Key, pages []adapter.Page) int {
	lb := int(e.layout.LayerBytes())
	for b := range keys {
		for l := range e.layout.Layers {
			if err := e.dev.CopyOut(ctx, e.scratch, pages[b], l*lb); err != nil || !Check(e.scratch, e.check, keys[b], l) {
				e.st.wrongKV.Add(1)
				e.opts.Logger.Error("enginesim: loaded KV does not match its tokens", "block", b, "layer", l)
				return b
			}
		}
	}
	return len(keys)
}

// emit produces j's next token: a function of the prompt and position.
func (e *Engine) emit(j *Job) {
	var seed uint32
	if len(j.keys) > 0 {
		k := j.keys[len(j.keys)-1]
		seed = uint32(k[0]) | uint32(k[1])<<8
	}
	tok := (seed + uint32(len(j.res.Output))*2654435761 + uint32(len(j.req.Tokens))) % 32000
	j.res.Output = append(j.res.Output, tok)
	j.out <- tok // buffered to MaxTokens: never blocks
	e.st.generated.Add(1)
}

func (e *Engine) decodeStep(ctx context.Context) {
	sleep(ctx, time.Duration(float64(e.opts.DecodeStep)*e.opts.TimeScale))
	keep := e.running[:0]
	for _, j := range e.running {
		e.emit(j)
		if len(j.res.Output) >= j.req.MaxTokens {
			e.finish(j, nil)
			continue
		}
		keep = append(keep, j)
	}
	clear(e.running[len(keep):])
	e.running = keep
}

// finish releases j's pages and ends it.
func (e *Engine) finish(j *Job, err error) {
	for _, k := range j.refs {
		e.pool.release(k)
	}
	for _, p := range j.private {
		e.pool.freePage(p)
	}
	j.refs, j.private = nil, nil
	if err == nil {
		j.res.E2E = time.Since(j.arrival)
		e.st.completed.Add(1)
	} else {
		e.st.failed.Add(1)
	}
	j.err = err
	close(j.out)
	close(j.done)
}

// offload is the pool's eviction hook for a block yuebing may not have (its
// save was dropped): the block leaving HBM goes down to yuebing.
func (e *Engine) offload(k block.Key, page adapter.Page) {
	sv := e.conn.Save(adapter.Plan{Keys: []block.Key{k}})
	src := pageSource{e: e, pages: []adapter.Page{page}}
	// The page is reused as soon as this returns: wait for staging room
	// rather than lose the block. The copy out is the engine's cost.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for l := range e.layout.Layers {
		sv.LayerWait(ctx, l, src)
	}
	e.st.offloaded.Add(1)
}

// pageTarget maps a Load's blocks to pool pages (host-mapped on hbmsim, so
// the adapter writes straight into the device memory).
type pageTarget struct {
	e     *Engine
	pages []adapter.Page
}

func (t pageTarget) Region(blk, layer int) []byte {
	hm, ok := t.e.dev.(adapter.HostMapped)
	if !ok {
		panic("BUG: enginesim: the pool device is not host-mapped")
	}
	lb := int(t.e.layout.LayerBytes())
	return hm.PageMemory(t.pages[blk])[layer*lb : (layer+1)*lb]
}

// pageSource reads a Save's layers out of pool pages.
type pageSource struct {
	e     *Engine
	pages []adapter.Page
}

func (s pageSource) CopyLayer(blk, layer int, dst []byte) error {
	if blk >= len(s.pages) {
		return errors.New("enginesim: save of a block without a page")
	}
	return s.e.dev.CopyOut(context.Background(), dst, s.pages[blk], layer*len(dst))
}

// engineHash is the engine's own name for a block in its KV events. Like
// vLLM's, it is the engine's business: routers re-key blocks from their
// token ids, so the simulator just uses the key's bytes.
func engineHash(k block.Key) kvevents.Hash { return kvevents.HashBytes(k[:]) }

// publishStored publishes the blocks at indexes stored (ascending) of a
// prompt's chain as BlockStored events, one per run of consecutive blocks,
// each with its parent and token ids.
func (e *Engine) publishStored(keys []block.Key, stored []int, tokens []uint32, bt int) {
	var evs []kvevents.Event
	for i := 0; i < len(stored); {
		j := i + 1
		for j < len(stored) && stored[j] == stored[j-1]+1 {
			j++
		}
		first, last := stored[i], stored[j-1]
		ev := kvevents.Event{Kind: kvevents.BlockStored, BlockSize: bt, Medium: "GPU",
			Tokens: tokens[first*bt : (last+1)*bt]}
		if first > 0 {
			ev.Parent = engineHash(keys[first-1])
		}
		for b := first; b <= last; b++ {
			ev.Hashes = append(ev.Hashes, engineHash(keys[b]))
		}
		evs = append(evs, ev)
		i = j
	}
	if err := e.opts.Events.Publish(evs); err != nil {
		e.opts.Logger.Warn("enginesim: publishing KV events", "err", err)
	}
}

// publishRemoved publishes an evicted block as BlockRemoved.
func (e *Engine) publishRemoved(k block.Key) {
	ev := []kvevents.Event{{Kind: kvevents.BlockRemoved, Hashes: []kvevents.Hash{engineHash(k)}, Medium: "GPU"}}
	if err := e.opts.Events.Publish(ev); err != nil {
		e.opts.Logger.Warn("enginesim: publishing KV events", "err", err)
	}
}
