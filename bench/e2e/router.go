package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/enginesim"
	"github.com/yuebing/yuebing/kvevents"
	"github.com/yuebing/yuebing/router"
	"github.com/yuebing/yuebing/scheduler"
	"github.com/yuebing/yuebing/server"
)

// Routings compared by `yuebing bench e2e --router`: the conductor's
// Algorithm 1 on live state against the two cache-blind placements.
const (
	RoutingConductor   = "conductor"
	RoutingRoundRobin  = "round_robin"
	RoutingLeastLoaded = "least_loaded"
)

// RouterOptions configure `yuebing bench e2e --router`. The embedded
// Options give the trace, the sample, the time scales and the engines,
// with two defaults of their own here: Engines 4, and PoolBlocks (each
// engine's HBM) what keeps a block cached about as long, in the trace's
// time, as a real engine keeps it (see hbmBlocks), at least 48.
type RouterOptions struct {
	Options
	// Routings to compare, each a policy name the conductor takes.
	// Default: conductor, round_robin, least_loaded.
	Routings []string
	// TTFTSLO is the TTFT service level: the router rejects (429) a
	// request it predicts past it, and a request counts towards the
	// effective capacity when it is served within it. Default: 1.25 times
	// the prefill of the sample's longest prompt without any cache, at
	// the run's time scale, and at least twice the mean one: every
	// request can meet it on an idle engine, so what is rejected or late
	// is so for the load, not for its length.
	TTFTSLO time.Duration
	// Pool also gives the engines the yuebing node at Addr as their shared
	// KV pool, through the adapter; by default they cache in their own
	// HBM only, which the router follows through their KV events.
	Pool bool
	// Bandwidth is the router's transfer estimate in bytes per second.
	// Default: an adapter load of the run's layout, measured at the start
	// of the run; without the pool, 1 byte/s: engines without a shared
	// pool or a node have no way to receive a pulled prefix, so a pull
	// must never look worth it.
	Bandwidth float64
	// ProbeInterval is how often the router reads engines' /metrics.
	// Default 1 minute: the simulators export no queue gauge and do not
	// fail here, so probes only check that engines answer; a probe may
	// take half the interval, and one that takes longer takes the engine
	// out of scheduling, which a loaded machine must not cause (at 1 s and
	// at 5 s it did, on the 2-core VM shared with soak tests: every
	// engine out, requests answered 503).
	ProbeInterval time.Duration
	// SideBySide replays the routings at the same time instead of one
	// after another: a neighbour's burst of load then weighs on all of
	// them alike, but their own timers and requests compete too, which
	// adds a delay the router does not predict to every TTFT (on the
	// loaded 2-core VM about 0.05 s, a quarter of the mean).
	SideBySide bool
	// Log, if set, receives one line per routing as it ends.
	Log io.Writer
	// Prompts is how requests carry their prompts: PromptsIDs (default),
	// token ids, or PromptsChat, chats of text the router and the engines
	// tokenize.
	Prompts string

	slo         time.Duration
	prefill     *scheduler.PrefillModel
	scaleByLoad bool
	sizeHBM     bool
}

func (o *RouterOptions) ensureDefaults() {
	if o.Engines == 0 {
		o.Engines = 4
	}
	o.scaleByLoad = o.TimeScale == 0 && o.Compression == 0
	o.sizeHBM = o.PoolBlocks == 0
	// Default 0.7: busy enough that queueing counts, as in the paper's
	// experiments, with room for the bursts of the trace.
	if o.Load == 0 {
		o.Load = 0.7
	}
	o.Options.ensureDefaults()
	if len(o.Routings) == 0 {
		o.Routings = []string{RoutingConductor, RoutingRoundRobin, RoutingLeastLoaded}
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = time.Minute
	}
	if o.Prompts == "" {
		o.Prompts = PromptsIDs
	}
}

// RouterTicks is the number of Progress ticks RunRouter makes.
func RouterTicks(o RouterOptions) int64 {
	o.ensureDefaults()
	return int64(len(o.Routings) * o.Requests)
}

// RoutedRequest is one request of a routed replay, as the client saw it.
type RoutedRequest struct {
	// Status is the router's answer: 200, 429 for an early rejection.
	Status int
	Engine string
	// TTFT is from sending the request to the first streamed chunk;
	// Predicted is the router's estimate for it (0 when rejected).
	TTFT, Predicted time.Duration
	// PrefixTokens is the prefix the router counted as cached on the
	// engine; the rest come from the engine's own report.
	PrefixTokens                                                int
	PromptTokens, LocalHitTokens, PoolHitTokens, ComputedTokens int
	// Queue is the engine's wait before the prefill started.
	Queue time.Duration
}

// RoutingResult is one routing's replay.
type RoutingResult struct {
	Routing  string
	Requests []RoutedRequest // in sample order
	Failed   int
	Stats    []enginesim.Stats
}

// served returns the TTFTs of the requests that were answered, sorted.
func (r *RoutingResult) served() []time.Duration {
	var ts []time.Duration
	for _, q := range r.Requests {
		if q.Status == http.StatusOK {
			ts = append(ts, q.TTFT)
		}
	}
	slices.Sort(ts)
	return ts
}

// RouterResult is a whole run.
type RouterResult struct {
	Options  RouterOptions
	Routings []RoutingResult
	Report   *bench.Report
}

// RunRouter replays a sample of a trace through the conductor's router
// (`yuebing conductor` with engines, on a loopback listener) in front of
// o.Engines engine simulators, each on its own HTTP listener and
// publishing vLLM KV events over ZMQ, once per routing (one after another
// unless o.SideBySide), each with engines, a router and a namespace of its
// own. With o.Pool the engines load and save KV through the yuebing node
// at o.Addr.
func RunRouter(ctx context.Context, o RouterOptions) (*RouterResult, error) {
	o.ensureDefaults()
	if o.Trace == "" || (o.Addr == "" && o.Pool) {
		return nil, fmt.Errorf("%w: a trace and, with the pool, a node address are required", bench.ErrOptions)
	}
	if err := o.Layout.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", bench.ErrOptions, err)
	}
	for _, r := range o.Routings {
		if _, err := scheduler.ParsePolicy(r); err != nil {
			return nil, fmt.Errorf("%w: routing: %w", bench.ErrOptions, err)
		}
	}
	if o.TTFTSLO < 0 || !(o.Bandwidth >= 0) || !(o.Load > 0) || math.IsInf(o.Load, 0) {
		return nil, fmt.Errorf("%w: TTFT SLO and bandwidth must not be negative, load must be positive", bench.ErrOptions)
	}
	reqs, err := bench.LoadTrace(o.Trace)
	if err != nil {
		return nil, err
	}
	sample := sampleE2E(reqs, o.Options)
	if len(sample) == 0 {
		return nil, fmt.Errorf("%w: no request of %s fits --max-input %d", bench.ErrOptions, o.Trace, o.MaxInput)
	}
	span := sample[len(sample)-1].at
	if o.Scale == 0 {
		o.Scale = max(1, span.Seconds()/o.Duration.Seconds())
	}
	model := scheduler.DefaultPrefillModel()
	var work, longest float64 // prefill seconds of the sample, unscaled, no cache
	for _, r := range sample {
		t := model.Seconds(len(r.tokens), 0)
		work += t
		longest = max(longest, t)
	}
	wall := span.Seconds() / o.Scale
	switch {
	case o.TimeScale > 0:
	case o.scaleByLoad && span > 0:
		o.TimeScale = o.Load * float64(o.Engines) * wall / work
	default:
		o.TimeScale = o.Compression / o.Scale
	}
	work *= o.TimeScale
	if wall > 0 {
		o.offered = work / float64(o.Engines) / wall
	}
	o.slo = o.TTFTSLO
	if o.slo == 0 {
		o.slo = time.Duration(max(2*work/float64(len(sample)), 1.25*longest*o.TimeScale) * float64(time.Second))
	}
	if o.sizeHBM {
		o.PoolBlocks = hbmBlocks(reqs, sample, o.Engines, span)
	}
	if o.prefill, err = scaledPrefill(model, o.TimeScale); err != nil {
		return nil, err
	}
	res := &RouterResult{Report: &bench.Report{}}
	res.Report.Human = bench.HumanColumns["e2e --router"]
	var cl *client.Client
	if o.Pool {
		if cl, err = client.New(o.Addr, client.Options{}); err != nil {
			return nil, err
		}
		if o.Bandwidth == 0 {
			// What a pull costs here is an adapter load from the node:
			// measure it rather than assume a testbed's RDMA.
			lo := o.Options
			lo.OnlyRunLayout, lo.Quick = true, true
			rows, err := measureAdapterLoad(ctx, lo, cl)
			if err != nil {
				return nil, err
			}
			o.Bandwidth = rows[0]["gbps"].(float64) * 1e9
			res.Report.Add(rows[0])
		}
	}
	if o.Bandwidth == 0 {
		o.Bandwidth = 1
	}
	res.Options = o
	// Each routing has engines, a router and a namespace of its own.
	res.Routings = make([]RoutingResult, len(o.Routings))
	errs := make([]error, len(o.Routings))
	var wg sync.WaitGroup
	var logMu sync.Mutex
	if o.Prompts == PromptsChat && !o.SideBySide {
		// The process's first chat replay runs about twice as slow as the
		// same replay after it (measured: least_loaded 0.45 s mean TTFT
		// first, 0.22 s third, in one run), which would decide the
		// comparison by order; a warm-up replay of the first routing runs
		// first and is not reported.
		wo := o
		wo.Progress, wo.Log = nil, nil
		if _, err := replayRouted(ctx, wo, cl, o.Routings[0], sample); err != nil {
			return nil, fmt.Errorf("bench: e2e --router: warm-up: %w", err)
		}
	}
	for i, routing := range o.Routings {
		replay := func() {
			rr, err := replayRouted(ctx, o, cl, routing, sample)
			if err != nil {
				errs[i] = fmt.Errorf("bench: e2e --router: %s: %w", routing, err)
				return
			}
			res.Routings[i] = rr
			if o.Log != nil {
				row := e2eRouterRow(o, rr)
				logMu.Lock()
				fmt.Fprintf(o.Log, "e2e --router: %-12s %d served, %d rejected, TTFT mean %.3fs p90 %.3fs, predicted error p50 %.2f\n",
					routing, row["requests"], row["rejected"], row["ttft_mean_s"], row["ttft_p90_s"], row["predicted_ttft_p50_error"])
				logMu.Unlock()
			}
		}
		if !o.SideBySide {
			if replay(); errs[i] != nil {
				break
			}
			continue
		}
		wg.Go(replay)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var base bench.Row
	rows := make([]bench.Row, len(res.Routings))
	for i, rr := range res.Routings {
		rows[i] = e2eRouterRow(o, rr)
		if rr.Routing == RoutingLeastLoaded {
			base = rows[i]
		}
	}
	for _, row := range rows {
		if base != nil && row["routing"] != RoutingLeastLoaded && base["ttft_mean_s"].(float64) > 0 {
			bm, m := base["ttft_mean_s"].(float64), row["ttft_mean_s"].(float64)
			row["baseline"] = RoutingLeastLoaded
			row["baseline_ttft_mean_s"] = bm
			row["ttft_vs_baseline"] = m / bm
			row["ratio"] = bm / m // speed-up: higher is better
		}
		res.Report.Add(row)
	}
	return res, nil
}

// realHBMBlocks is a real engine's HBM in 512-token blocks: LLaMA3-70B on
// 8 x A800 holds about 1.5M tokens of KV beside the weights.
const realHBMBlocks = 3000

// realPrefillInstances serve the whole trace, as in the paper's
// conversation experiment (`yuebing bench sched`: 8 prefill instances).
const realPrefillInstances = 8

// hbmBlocks sizes an engine's HBM so that its cache turns over in about
// the same trace time as a real engine's: a real one takes in the trace's
// new blocks split over realPrefillInstances and holds realHBMBlocks (on
// the conversation trace, about 7.7 minutes of them), and an engine here
// takes in the sample's new blocks split over engines over the sample's
// span. Sampled conversations are fewer than the trace's, so the engines
// need fewer blocks to keep a conversation's history from one turn to the
// next as long as a real one would; never fewer than 48 (room for the
// requests in flight, as in bench e2e).
func hbmBlocks(trace []bench.Request, sample []e2eRequest, engines int, span time.Duration) int {
	if len(trace) < 2 || span <= 0 {
		return 48
	}
	distinct := map[uint64]bool{}
	first, last := trace[0].Timestamp, trace[0].Timestamp
	for _, r := range trace {
		for _, h := range r.HashIDs {
			distinct[h] = true
		}
		first, last = min(first, r.Timestamp), max(last, r.Timestamp)
	}
	traceSpan := (last - first).Seconds()
	turnover := realHBMBlocks * realPrefillInstances * traceSpan / float64(len(distinct)) // seconds
	own := map[uint32]bool{}
	for _, r := range sample {
		for b := 0; b < len(r.tokens); b += bench.TraceBlockTokens {
			own[r.tokens[b]] = true // a block's first token names its hash id
		}
	}
	rate := float64(len(own)) / float64(engines) / span.Seconds() // blocks per engine per trace second
	return max(48, int(math.Ceil(turnover*rate)))
}

// scaledPrefill returns m's prefill times multiplied by s, as a model the
// router can predict with: the same polynomial, so the fit is exact.
func scaledPrefill(m *scheduler.PrefillModel, s float64) (*scheduler.PrefillModel, error) {
	var samples []scheduler.PrefillSample
	for _, n := range []int{256, 1024, 4096, 16384, 65536} {
		for _, f := range []int{0, 1, 2, 3, 4} {
			p := n * f / 4
			samples = append(samples, scheduler.PrefillSample{InputLen: n, PrefixLen: p, Seconds: m.Seconds(n, p) * s})
		}
	}
	return scheduler.FitPrefill(samples)
}

// routedEngine is one engine simulator with its listeners.
type routedEngine struct {
	e    *enginesim.Engine
	pub  *kvevents.Publisher
	conn *adapter.Connector
	srv  *http.Server
	url  string
}

func replayRouted(ctx context.Context, o RouterOptions, cl *client.Client, routing string, sample []e2eRequest) (RoutingResult, error) {
	rr := RoutingResult{Routing: routing}
	// A namespace per routing: nothing cached by an earlier one hits.
	ns := fmt.Sprintf("bench/e2e-router-%d", time.Now().UnixNano())
	runCtx, stop := context.WithCancel(ctx)
	var loops sync.WaitGroup
	engines := make([]*routedEngine, o.Engines)
	defer func() {
		stop()
		for _, re := range engines {
			if re != nil && re.srv != nil {
				re.srv.Close()
			}
		}
		loops.Wait()
		for _, re := range engines {
			if re == nil {
				continue
			}
			if re.conn != nil {
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				re.conn.Close(cctx)
				cancel()
			}
			if re.pub != nil {
				re.pub.Close()
			}
		}
	}()
	var cfgs []router.Engine
	for i := range engines {
		re := &routedEngine{}
		engines[i] = re
		var err error
		re.pub, err = kvevents.NewPublisher(kvevents.PublisherOptions{Endpoint: "tcp://127.0.0.1:0", Replay: "tcp://127.0.0.1:0", Logger: o.Logger})
		if err != nil {
			return rr, err
		}
		eo := enginesim.Options{
			Name: fmt.Sprintf("e%d", i), Layout: o.Layout, Namespace: ns, PoolBlocks: o.PoolBlocks,
			Prefill: scheduler.DefaultPrefillModel(), TimeScale: o.TimeScale,
			MaxWaiting: len(sample), MaxTokens: o.MaxOutput, Logger: o.Logger, Events: re.pub,
		}
		if o.Pool {
			if re.conn, err = adapter.New(adapter.Options{Client: cl, Namespace: ns, Layout: o.Layout, Logger: o.Logger}); err != nil {
				return rr, err
			}
			eo.Connector = re.conn
		}
		if re.e, err = enginesim.New(eo); err != nil {
			return rr, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return rr, err
		}
		re.url = "http://" + ln.Addr().String()
		re.srv = &http.Server{Handler: re.e.Handler(), ReadHeaderTimeout: 10 * time.Second}
		loops.Go(func() { re.e.Run(runCtx) })
		loops.Go(func() { re.srv.Serve(ln) })
		cfgs = append(cfgs, router.Engine{ID: eo.Name, URL: re.url, Events: re.pub.Endpoint(), Replay: re.pub.ReplayEndpoint()})
	}
	url, routerDone, err := startBenchRouter(runCtx, o, routing, ns, cfgs)
	if err != nil {
		return rr, err
	}
	defer func() {
		stop()
		<-routerDone
	}()
	// Every engine's event stream must reach the router before the replay:
	// a router that joins late replays from the start, but a decision made
	// before the subscription would count on nothing.
	if err := waitRouterEvents(ctx, url, o.Layout.Name, engines, o.Layout.BlockTokens); err != nil {
		return rr, err
	}

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	rr.Requests = make([]RoutedRequest, len(sample))
	errs := make([]error, len(sample))
	var wg sync.WaitGroup
	var chats [][]byte
	if o.Prompts == PromptsChat {
		chats = chatBodies(sample, o.Layout.Name)
	}
	start := time.Now()
	for i, r := range sample {
		if err := sleepUntil(ctx, start.Add(time.Duration(float64(r.at)/o.Scale))); err != nil {
			wg.Wait()
			return rr, err
		}
		var chat []byte
		if chats != nil {
			chat = chats[i]
		}
		wg.Go(func() {
			rr.Requests[i], errs[i] = routedCall(ctx, hc, url, o.Layout.Name, r, chat)
			if o.Progress != nil {
				o.Progress.Add(1)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			rr.Failed++
			if rr.Failed == 1 && o.Log != nil {
				fmt.Fprintf(o.Log, "e2e --router: %s: request %d failed (the first of those that did): %v\n", routing, i, err)
			}
		}
	}
	for _, re := range engines {
		rr.Stats = append(rr.Stats, re.e.Stats())
	}
	return rr, ctx.Err()
}

// startBenchRouter runs the conductor's router in this process on a
// loopback listener and returns its URL; done closes when it has stopped.
func startBenchRouter(ctx context.Context, o RouterOptions, routing, ns string, engines []router.Engine) (string, <-chan struct{}, error) {
	cc := server.DefaultConductorConfig()
	cc.Policy = routing
	cc.Rejection = scheduler.RejectPredicted.String()
	cc.TTFTSLO = o.slo
	cc.BlockSize = o.Layout.BlockTokens
	cc.KVBytesPerToken = server.ByteSize(o.Layout.BlockBytes() / int64(o.Layout.BlockTokens))
	cc.BandwidthGbps = o.Bandwidth * 8 / 1e9
	cc.Options.Prefill = o.prefill
	cc.Options.Logger = o.Logger
	pr, pw := io.Pipe()
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = server.RunRouter(ctx, server.RouterOptions{
			Listen: "127.0.0.1:0", Banner: pw, Conductor: cc,
			Router: server.RouterConfig{Model: o.Layout.Name, Namespace: ns, BlockSize: o.Layout.BlockTokens,
				Engines: engines, ProbeInterval: o.ProbeInterval},
		})
		pw.CloseWithError(runErr)
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		<-done
		return "", nil, fmt.Errorf("router did not start: %w", errors.Join(err, runErr))
	}
	go io.Copy(io.Discard, pr)
	return strings.TrimSpace(strings.TrimPrefix(line, "conductor listening on ")), done, nil
}

// waitRouterEvents waits until the router follows every engine's KV
// events: each engine runs a one-block prompt of its own, sent to it
// directly, until the router counts a stored event from it. ZMQ drops what
// a subscriber not yet connected would have read, so a prompt is sent
// again each round until its event arrives.
func waitRouterEvents(ctx context.Context, url, model string, engines []*routedEngine, blockTokens int) error {
	deadline := time.Now().Add(20 * time.Second)
	seen := make([]bool, len(engines))
	for round := 0; ; round++ {
		stored, err := bench.RouterSeries(ctx, http.DefaultClient, url)
		left := 0
		for i, re := range engines {
			if seen[i] = seen[i] || stored[bench.StoredEventsSeries(re.e.Options().Name)] > 0; seen[i] {
				continue
			}
			left++
			toks := make([]string, blockTokens)
			for j := range toks {
				// Far from the trace's ids (hash id times an odd
				// constant): no replayed prompt shares this block.
				toks[j] = strconv.FormatUint(uint64(0xfff00000+round<<12+i<<10+j), 10)
			}
			body := `{"model":` + strconv.Quote(model) + `,"max_tokens":1,"prompt":[` + strings.Join(toks, ",") + `]}`
			req, rerr := http.NewRequestWithContext(ctx, http.MethodPost, re.url+"/v1/completions", strings.NewReader(body))
			if rerr != nil {
				return rerr
			}
			resp, rerr := http.DefaultClient.Do(req)
			if rerr != nil {
				return rerr
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the router follows the KV events of %d of %d engines after 20 s (%v)", len(engines)-left, len(engines), err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// routedCall streams one completion through the router.
func routedCall(ctx context.Context, hc *http.Client, url, model string, r e2eRequest, chat []byte) (RoutedRequest, error) {
	var out RoutedRequest
	var body bytes.Buffer
	path := "/v1/completions"
	if chat != nil {
		path = "/v1/chat/completions"
		body.Write(chat)
	} else {
		writeIDsBody(&body, model, r)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, &body)
	if err != nil {
		return out, err
	}
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	out.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode == http.StatusTooManyRequests {
			return out, nil
		}
		return out, fmt.Errorf("router answered %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	out.Engine = resp.Header.Get(router.HeaderEngine)
	if s, err := strconv.ParseFloat(resp.Header.Get(router.HeaderPredictedTTFT), 64); err == nil {
		out.Predicted = time.Duration(s * float64(time.Second))
	}
	out.PrefixTokens, _ = strconv.Atoi(resp.Header.Get(router.HeaderPrefixTokens))
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	var last []byte
	for {
		line, err := rd.ReadBytes('\n')
		if d, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data: ")); ok {
			if out.TTFT == 0 {
				out.TTFT = time.Since(t0)
			}
			if !bytes.Equal(d, []byte("[DONE]")) {
				last = d
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, err
		}
	}
	var final struct {
		Yuebing *struct {
			LocalHitTokens int     `json:"local_hit_tokens"`
			PoolHitTokens  int     `json:"pool_hit_tokens"`
			ComputedTokens int     `json:"computed_tokens"`
			QueueS         float64 `json:"queue_s"`
		} `json:"yuebing"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(last, &final); err != nil || final.Yuebing == nil {
		if final.Error != nil {
			return out, fmt.Errorf("engine %s: %s", out.Engine, final.Error.Message)
		}
		return out, fmt.Errorf("engine %s: the stream ended without its cache report", out.Engine)
	}
	y := final.Yuebing
	out.PromptTokens = len(r.tokens)
	if chat != nil {
		// The engine's count of the chat's tokens.
		out.PromptTokens = y.LocalHitTokens + y.PoolHitTokens + y.ComputedTokens
	}
	out.LocalHitTokens, out.PoolHitTokens, out.ComputedTokens = y.LocalHitTokens, y.PoolHitTokens, y.ComputedTokens
	out.Queue = time.Duration(y.QueueS * float64(time.Second))
	return out, nil
}

// writeIDsBody writes r as a completion of token ids.
func writeIDsBody(body *bytes.Buffer, model string, r e2eRequest) {
	body.WriteString(`{"model":`)
	body.WriteString(strconv.Quote(model))
	body.WriteString(`,"max_tokens":`)
	body.WriteString(strconv.Itoa(r.output))
	body.WriteString(`,"stream":true,"prompt":[`)
	for i, t := range r.tokens {
		if i > 0 {
			body.WriteByte(',')
		}
		body.WriteString(strconv.FormatUint(uint64(t), 10))
	}
	body.WriteString("]}")
}

func e2eRouterRow(o RouterOptions, rr RoutingResult) bench.Row {
	ttft := rr.served()
	var sum time.Duration
	for _, t := range ttft {
		sum += t
	}
	mean := 0.0
	if len(ttft) > 0 {
		mean = sum.Seconds() / float64(len(ttft))
	}
	var rejected, withinSLO int
	var prompt, local, pool, computed, counted int64
	var errs, ratios []float64
	var queue time.Duration
	perEngine := map[string]int{}
	for _, q := range rr.Requests {
		switch q.Status {
		case http.StatusTooManyRequests:
			rejected++
			continue
		case http.StatusOK:
		default:
			continue
		}
		if q.TTFT <= o.slo {
			withinSLO++
		}
		perEngine[q.Engine]++
		prompt += int64(q.PromptTokens)
		local += int64(q.LocalHitTokens)
		pool += int64(q.PoolHitTokens)
		computed += int64(q.ComputedTokens)
		counted += int64(q.PrefixTokens)
		queue += q.Queue
		if q.Predicted > 0 && q.TTFT > 0 {
			errs = append(errs, math.Abs(q.Predicted.Seconds()-q.TTFT.Seconds())/q.TTFT.Seconds())
			ratios = append(ratios, q.Predicted.Seconds()/q.TTFT.Seconds())
		}
	}
	busiest := 0
	for _, n := range perEngine {
		busiest = max(busiest, n)
	}
	frac := func(a, b int64) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	return bench.Row{
		"name": "e2e", "routing": rr.Routing, "engines": o.Engines, "pool": o.Pool,
		"offered": len(rr.Requests), "requests": len(ttft), "rejected": rejected, "failed": rr.Failed,
		"ttft_mean_s": mean, "ttft_p50_s": ttftQuantile(ttft, 0.5), "ttft_p90_s": ttftQuantile(ttft, 0.9), "ttft_p99_s": ttftQuantile(ttft, 0.99),
		"queue_mean_s": queue.Seconds() / float64(max(1, len(ttft))),
		"ttft_slo_s":   o.slo.Seconds(), "effective_capacity": frac(int64(withinSLO), int64(len(rr.Requests))),
		"prompt_tokens": prompt, "hit_hbm_tokens": local, "hit_pool_tokens": pool, "computed_tokens": computed,
		"hit_frac": frac(local+pool, prompt), "predicted_prefix_tokens": counted,
		"predicted_ttft_p50_error": bench.Quantile(errs, 0.5), "predicted_ttft_p90_error": bench.Quantile(errs, 0.9),
		"predicted_over_observed_p50": bench.Quantile(ratios, 0.5),
		"busiest_engine_frac":         frac(int64(busiest), int64(len(ttft))),
		"time_scale":                  o.TimeScale, "scale": o.Scale, "offered_load": o.offered, "pool_blocks": o.PoolBlocks,
		"bandwidth_gbps": o.Bandwidth * 8 / 1e9, "prompts": o.Prompts,
	}
}
