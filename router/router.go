package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/tokenizer"
	"github.com/yuebing/yuebing/kvevents"
	"github.com/yuebing/yuebing/scheduler"
)

// Router places OpenAI requests on engines by Algorithm 1 over live state
// and forwards them. It is safe for concurrent use; Run drives its
// background work.
type Router struct {
	opts    Options
	tok     *Tokenizer
	d       *scheduler.Driver
	log     *slog.Logger
	m       *metrics
	engines map[string]*engine
	order   []*engine
	pool    *poolIndex

	// prefillMean is a running mean of predicted prefill seconds, in
	// nanoseconds, which turns an engine's waiting-request count into a
	// queue time.
	prefillMean atomic.Int64

	// specCount counts speculative entries of all engines, expired ones
	// not yet swept included.
	specCount atomic.Int64

	storeMu sync.Mutex
	stores  map[string]bool // pool store instances, and whether registered

	// probes runs one probe per engine at a time, keyed by engine id: the
	// ticker's and those failed requests trigger share it.
	probes singleflight.Group
	// probeClient is Options.Client without keep-alives: a connection kept
	// from an earlier probe or request dies with its engine, and a probe
	// that reused it would read a cut connection (a miss) where a fresh one
	// is refused (the engine is out at once).
	probeClient *http.Client

	// tokLogged is when an engine /tokenize failure was last logged, in
	// Unix nanoseconds.
	tokLogged atomic.Int64

	// prep holds a token per request being read and tokenized by Place
	// (MaxConcurrentPrepares).
	prep chan struct{}
}

// New validates opts and returns a Router with every engine registered.
func New(opts Options) (*Router, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	tok, err := NewTokenizer(opts.Encoding)
	if err != nil {
		return nil, err
	}
	tok.chats = tokenizer.NewSegmentCache(opts.TokenCacheTokens)
	r := &Router{
		opts:    opts,
		tok:     tok,
		log:     opts.Logger,
		engines: make(map[string]*engine, len(opts.Engines)),
		prep:    make(chan struct{}, opts.MaxConcurrentPrepares),

		probeClient: freshConns(opts.Client),
	}
	r.m = newMetrics(r)
	if opts.Tokenize != TokenizeLocal {
		rt := &remoteTokenizer{model: opts.Model, apiKey: opts.EngineAPIKey, timeout: opts.TokenizeTimeout, client: opts.Client,
			cache: tokenizer.NewSegmentCache(opts.TokenCacheTokens), onFail: r.tokenizeFailed}
		for _, e := range opts.Engines {
			rt.urls = append(rt.urls, e.URL)
		}
		rt.up = func(i int) bool { return r.scheduled(r.order[i].ID) }
		tok.remote = rt
		tok.useEngine.Store(opts.Tokenize == TokenizeEngine)
	}
	r.pool = newPoolIndex(opts.Pool, opts.PoolToken, opts.PoolTimeout, opts.Client)
	mig := opts.Migrator
	if mig == nil {
		mig = &PullMigrator{Router: r}
	}
	r.d, err = scheduler.NewDriver(scheduler.DriverOptions{Core: opts.Scheduler, Migrator: mig, Blocks: r.blocks})
	if err != nil {
		return nil, err
	}
	for _, cfg := range opts.Engines {
		role := scheduler.RolePrefill
		if cfg.Role == RoleDecode {
			role = scheduler.RoleDecode
		}
		e := newEngine(cfg, role, opts.BlockSize)
		if err := r.d.AddInstance(scheduler.Instance{ID: e.ID, Addr: e.URL, Role: e.role}); err != nil {
			return nil, err
		}
		if cfg.Events != "" && e.role != scheduler.RoleDecode {
			e.sub, err = kvevents.NewSubscriber(kvevents.Options{
				Engine: e.ID, Endpoint: cfg.Events, Replay: cfg.Replay,
				Namespace: opts.Namespace, BlockSize: opts.BlockSize,
				Sink: engineSink{r: r, e: e}, Stats: e.stats, Logger: opts.Logger,
			})
			if err != nil {
				return nil, fmt.Errorf("engine %q: %w", e.ID, err)
			}
		}
		r.engines[e.ID] = e
		r.order = append(r.order, e)
	}
	return r, nil
}

// Model returns the model name the router serves.
func (r *Router) Model() string { return r.opts.Model }

// Options returns the router's options, defaults filled in.
func (r *Router) Options() Options { return r.opts }

// Driver returns the scheduler driver, for status endpoints.
func (r *Router) Driver() *scheduler.Driver { return r.d }

// EventStats returns an engine's KV event counters, nil for an unknown
// engine or one without events.
func (r *Router) EventStats(id string) *kvevents.Stats {
	if e := r.engines[id]; e != nil && e.sub != nil {
		return e.stats
	}
	return nil
}

// Run follows the engines' events, probes their /metrics, sweeps expired
// speculative entries and carries out pull plans until ctx ends.
func (r *Router) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, e := range r.order {
		if e.sub != nil {
			wg.Go(func() { e.sub.Run(ctx) })
		}
		wg.Go(func() { r.probeLoop(ctx, e) })
	}
	wg.Go(func() { r.d.Run(ctx) })
	if r.opts.Tokenize == TokenizeAuto {
		wg.Go(func() { r.chooseTokenizer(ctx) })
	}
	wg.Go(func() {
		// Expired entries already count as absent: the sweep only frees
		// them, and each costs a pass over an engine's blocks, so once a
		// TTL is often enough.
		t := time.NewTicker(max(r.opts.SpeculativeTTL, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				r.expire(now.UnixNano())
			}
		}
	})
	wg.Wait()
	return ctx.Err()
}

// Plan is a placed request.
type Plan struct {
	Decision scheduler.Decision
	Keys     []block.Key
	Prompt   Prompt
	// ns is the namespace Keys are chained under.
	ns string
}

// Prepared is a request read and keyed: its prompt and the chained keys
// of its blocks. Preparing touches no shared state, so it runs on every
// core at once; it is most of a decision's CPU time (parsing the body,
// one SHA-256 per block).
type Prepared struct {
	Prompt Prompt
	Keys   []block.Key
	// Exclude are engines not to place it on: a retry's, the engines that
	// failed it (whatever their probes decided, the retry goes elsewhere
	// when it can).
	Exclude []string
	// ns is the namespace Keys are chained under; "" is
	// Options.Namespace.
	ns string
}

// Place parses an OpenAI request body and places it for the caller ctx
// carries (WithCaller): Prepare, then Decide. At most
// MaxConcurrentPrepares requests are prepared at once; the others wait for
// a turn or for ctx to end. A rejection is an *Overloaded error; the
// caller must call Done with the plan of an accepted request.
func (r *Router) Place(ctx context.Context, kind Kind, body []byte) (*Plan, error) {
	r.m.prepWaiting.Inc()
	select {
	case r.prep <- struct{}{}:
		r.m.prepWaiting.Dec()
	case <-ctx.Done():
		r.m.prepWaiting.Dec()
		return nil, ctx.Err()
	}
	p, err := r.prepare(callerFrom(ctx).Namespace, kind, body)
	<-r.prep
	if err != nil {
		return nil, err
	}
	return r.Decide(ctx, p)
}

// Prepare parses an OpenAI request body for the router's model and chains
// its prompt's keys under Options.Namespace. Its caller bounds how many
// run at once (Place does).
func (r *Router) Prepare(kind Kind, body []byte) (Prepared, error) {
	return r.prepare("", kind, body)
}

// prepare is Prepare under namespace ns, "" meaning Options.Namespace.
func (r *Router) prepare(ns string, kind Kind, body []byte) (Prepared, error) {
	if ns == "" {
		ns = r.opts.Namespace
	}
	p, err := ParsePrompt(kind, body, r.tok, PromptLimits{MaxTokens: r.opts.MaxPromptTokens, MaxTextBytes: r.opts.MaxPromptBytes})
	if err != nil {
		return Prepared{}, err
	}
	// No model is the served one, as vLLM takes it.
	if p.Model != r.opts.Model && p.Model != "" {
		return Prepared{}, fmt.Errorf("%w: %q; this router serves %q", ErrModelNotFound, p.Model, r.opts.Model)
	}
	// The block size is validated; the namespace may be a caller's.
	keys, err := block.ChainKeys(ns, r.opts.BlockSize, p.Tokens)
	if err != nil {
		return Prepared{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return Prepared{Prompt: p, Keys: keys, ns: ns}, nil
}

// Decide places a prepared request: pool hits from the cluster index,
// each engine's cached prefix (matched under that engine's lock alone),
// Algorithm 1, and a speculative entry on the chosen engine. p comes from
// Prepare: its keys must be its prompt's. A rejection is an *Overloaded
// error; the caller must call Done with the plan of an accepted request.
func (r *Router) Decide(ctx context.Context, p Prepared) (*Plan, error) {
	keys := p.Keys
	req := scheduler.Request{Keys: keys, InputTokens: len(p.Prompt.Tokens), OutputTokens: p.Prompt.MaxTokens, Exclude: p.Exclude}
	ks := keySizes{base: r.opts.BlockSize, keys: keys, ns: p.ns, tokens: p.Prompt.Tokens}
	if ks.ns == "" {
		ks.ns = r.opts.Namespace
	}
	if len(keys) > 0 && r.pool != nil {
		req.Pool = r.poolHits(ctx, ks.ns, keys)
	}
	now := time.Now().UnixNano()
	var buf [16]scheduler.HeldPrefix
	req.Held = r.match(&ks, now, buf[:0])
	d, err := r.d.Schedule(req)
	if errors.Is(err, scheduler.ErrNoPrefill) {
		r.m.noEngine.Inc()
		return nil, fmt.Errorf("%w: every prefill engine is down", ErrNoEngine)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if !d.Accepted() {
		r.m.decisions.WithLabelValues("rejected_" + string(d.Rejected)).Inc()
		return nil, &Overloaded{Reason: string(d.Rejected), RetryAfter: r.opts.RetryAfter}
	}
	r.m.accepted.Inc()
	r.m.predicted.Observe(d.Estimates.TTFT.Seconds())
	r.countHits(&d, len(p.Prompt.Tokens))
	r.notePrefill(d.Estimates.Prefill)
	r.speculate(d.Prefill, &ks, now)
	return &Plan{Decision: d, Keys: keys, Prompt: p.Prompt, ns: ks.ns}, nil
}

func (r *Router) countHits(d *scheduler.Decision, n int) {
	local := d.LocalPrefixTokens
	pulled := d.PrefixTokens - local
	if local > 0 {
		r.m.hitHBM.Add(float64(local))
	}
	if pulled > 0 {
		r.m.hitTokens.WithLabelValues("pulled_" + d.PullSource.String()).Add(float64(pulled))
	}
	if miss := n - d.PrefixTokens; miss > 0 {
		r.m.hitMiss.Add(float64(miss))
	}
}

func (r *Router) notePrefill(p time.Duration) {
	// An exponential mean over about 64 requests: recent enough to follow
	// the prompt mix, smooth enough for one outlier not to matter.
	for {
		old := r.prefillMean.Load()
		nu := old + (int64(p)-old)/64
		if old == 0 {
			nu = int64(p)
		}
		if r.prefillMean.CompareAndSwap(old, nu) {
			return
		}
	}
}

// Done tells the scheduler a placed request left its engines.
func (r *Router) Done(p *Plan) {
	// The core forgets unknown ids; an error only means it expired first.
	_ = r.d.Finished(p.Decision.RequestID)
}

// freshConns returns c dialling a connection per request, where its
// transport can be told so.
func freshConns(c *http.Client) *http.Client {
	t, ok := c.Transport.(*http.Transport)
	if c.Transport == nil {
		t, ok = http.DefaultTransport.(*http.Transport)
	}
	if !ok {
		return c
	}
	t = t.Clone()
	t.DisableKeepAlives = true
	cc := *c
	cc.Transport = t
	return &cc
}

func defaultClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 10 * time.Minute,
	}}
}
