package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/enginesim"
	"github.com/yuebing/yuebing/scheduler"
)

// E2E modes: what the engines cache with.
const (
	ModeRecompute = "recompute" // no prefix caching at all
	ModeLocal     = "local"     // each engine's own prefix cache in HBM
	ModePool      = "pool"      // engine caches plus the yuebing pool
)

// Options configure `yuebing bench e2e`.
type Options struct {
	// Trace is a Mooncake trace file. Required.
	Trace string
	// Addr is the yuebing node's HTTP address. Required.
	Addr string
	// Engines is the number of engine simulators. Default 2.
	Engines int
	// Requests is the sample size: whole conversations are sampled (by
	// their first private block) over the whole trace, about this many
	// requests. Default 600; Quick 200.
	Requests int
	// MaxInput drops prompts longer than this many tokens. Default 16384;
	// Quick 8192.
	MaxInput int
	// MaxOutput caps generated tokens per request. Default 16; Quick 4.
	MaxOutput int
	// Duration is the span the sample is replayed over; it sets the
	// arrival speed-up unless Scale is given. Default 60s; Quick 20s.
	Duration time.Duration
	// Scale is the arrival speed-up over the trace's timestamps.
	Scale float64
	// Compression is how much faster arrivals run than compute: TimeScale
	// is Compression/Scale unless given. Default 40: conversation turns
	// come 40 s to 8 min apart in the trace (10th to 90th percentile), so
	// even 40x closer they mostly come after the previous turn's first
	// token, as in the trace, while compute keeps the weight it has
	// against transfer (a sim-70b block is 1/256 of a real one's bytes,
	// and moves here 20 to 100 times slower than over Mooncake's RDMA).
	Compression float64
	// TimeScale multiplies simulated compute times.
	TimeScale float64
	// Load, when given and neither TimeScale nor Compression is, sets
	// TimeScale so that the prefill load offered to each engine without
	// any caching is Load (1 keeps an engine busy all the time). TTFT
	// depends on it as queueing does: the busier the engines, the more a
	// prefill saved also saves the requests queued behind it.
	Load float64
	// PoolBlocks is each engine's HBM pool, in blocks. Default 48: room
	// for the requests in flight and a little more, a small fraction of
	// the sample's working set, as a real engine's HBM is of a real
	// trace's (3,000 blocks of LLaMA3-70B on 8 x A800 against 180,000
	// distinct blocks in the conversation trace).
	PoolBlocks int
	// Layout is the KV shape. Default sim-70b with 512-token blocks (the
	// traces' block size).
	Layout adapter.Layout
	// LoadBlocks is the prefix of the adapter_load measurement. Default 16.
	LoadBlocks int
	// OnlyRunLayout measures adapter_load on Layout only, not also on
	// Llama-3-8B's 32 MiB blocks (tests keep their memory small).
	OnlyRunLayout bool
	// Rounds replays the sample this many times in each mode, the modes'
	// order rotating from round to round, so a burst of other work on the
	// machine hits every mode alike; rows pool the rounds. Default 1.
	Rounds int
	// LoadAlways turns the engines' LoadIfFaster off: every pool hit is
	// loaded, even when computing it is estimated to be faster.
	LoadAlways bool
	// Quick shrinks everything to finish in well under two minutes.
	Quick bool
	// Progress, if set, advances once per finished request.
	Progress *bench.Progress
	// Logger receives engine and adapter warnings. Default: discarded.
	Logger *slog.Logger

	offered float64
}

func (o *Options) ensureDefaults() {
	pick := func(v *int, full, quick int) {
		if *v == 0 {
			*v = full
			if o.Quick {
				*v = quick
			}
		}
	}
	pick(&o.Engines, 2, 2)
	pick(&o.Requests, 600, 200)
	pick(&o.MaxInput, 16384, 8192)
	pick(&o.MaxOutput, 16, 4)
	pick(&o.PoolBlocks, 48, 48)
	pick(&o.LoadBlocks, 16, 16)
	pick(&o.Rounds, 1, 1)
	if o.Duration == 0 {
		o.Duration = 60 * time.Second
		if o.Quick {
			o.Duration = 20 * time.Second
		}
	}
	if o.Compression == 0 && (o.Load == 0 || o.TimeScale > 0) {
		o.Compression = 40
	}
	if o.Layout.Layers == 0 {
		o.Layout, _ = adapter.Preset("sim-70b", bench.TraceBlockTokens)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Ticks is the number of Progress ticks Run makes: one per replayed
// request, then one per adapter-load case and one for the disaggregated
// run, which take seconds of their own after the replay.
func Ticks(o Options) int64 {
	o.ensureDefaults()
	loads := 2
	if o.OnlyRunLayout {
		loads = 1
	}
	return int64(3*o.Requests*o.Rounds + loads + 1)
}

type e2eRequest struct {
	at     time.Duration
	tokens []uint32
	output int
}

// sampleE2E picks whole conversations: a request is kept when its first
// private block (the one after the shared system prompt) falls in the
// sample, so every turn of a kept conversation is kept.
func sampleE2E(reqs []bench.Request, o Options) []e2eRequest {
	var eligible []bench.Request
	for _, r := range reqs {
		if r.InputLength <= o.MaxInput && len(r.HashIDs) > 1 {
			eligible = append(eligible, r)
		}
	}
	if len(eligible) == 0 {
		return nil
	}
	mod := uint64(max(1, len(eligible)/max(o.Requests, 1)))
	var out []e2eRequest
	var t0 time.Duration = -1
	for _, r := range eligible {
		if r.HashIDs[1]%mod != 0 {
			continue
		}
		if t0 < 0 {
			t0 = r.Timestamp
		}
		toks := make([]uint32, 0, r.InputLength)
		for i, h := range r.HashIDs {
			n := min(bench.TraceBlockTokens, r.InputLength-i*bench.TraceBlockTokens)
			for j := range n {
				// A block's tokens are a function of its hash id alone:
				// equal ids, equal tokens, equal chained keys.
				toks = append(toks, uint32(h)*2654435761+uint32(j))
			}
		}
		out = append(out, e2eRequest{at: r.Timestamp - t0, tokens: toks, output: max(1, min(r.OutputLength, o.MaxOutput))})
		if len(out) == o.Requests {
			break
		}
	}
	return out
}

// ModeResult is one mode's replay.
type ModeResult struct {
	Mode    string
	TTFT    []time.Duration // sorted
	Results []enginesim.Result
	Stats   []enginesim.Stats
	Adapter []adapter.Stats
	Failed  int
}

// Result is a whole run.
type Result struct {
	Options Options
	Modes   []ModeResult
	Report  *bench.Report
}

// setTimeScale sets TimeScale, unless given, from Load or Compression, and
// the load offered to each engine without caching. work is the sample's
// prefill seconds at time scale 1, wall the replay's span.
func (o *Options) setTimeScale(work, wall float64) {
	switch {
	case o.TimeScale > 0:
	case o.Compression == 0 && o.Load > 0 && wall > 0 && work > 0:
		o.TimeScale = o.Load * float64(o.Engines) * wall / work
	default:
		if o.Compression == 0 {
			o.Compression = 40
		}
		o.TimeScale = o.Compression / o.Scale
	}
	if wall > 0 {
		o.offered = work * o.TimeScale / float64(o.Engines) / wall
	}
}

// Run replays a sample of a trace against o.Engines engine simulators
// three times (recompute, local, pool), measures adapter loads against a raw
// multi-get of the same bytes, and prefill/decode layer streaming.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.ensureDefaults()
	if o.Trace == "" || o.Addr == "" {
		return nil, fmt.Errorf("%w: a trace and a node address are required", bench.ErrOptions)
	}
	if !(o.Load >= 0) || math.IsInf(o.Load, 0) {
		return nil, fmt.Errorf("%w: load %v, want a positive number", bench.ErrOptions, o.Load)
	}
	if err := o.Layout.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", bench.ErrOptions, err)
	}
	reqs, err := bench.LoadTrace(o.Trace)
	if err != nil {
		return nil, err
	}
	sample := sampleE2E(reqs, o)
	if len(sample) == 0 {
		return nil, fmt.Errorf("%w: no request of %s fits --max-input %d", bench.ErrOptions, o.Trace, o.MaxInput)
	}
	span := sample[len(sample)-1].at
	if o.Scale == 0 {
		o.Scale = max(1, span.Seconds()/o.Duration.Seconds())
	}
	model := scheduler.DefaultPrefillModel()
	var work float64 // prefill seconds of the sample, unscaled, no cache
	for _, r := range sample {
		work += model.Seconds(len(r.tokens), 0)
	}
	o.setTimeScale(work, span.Seconds()/o.Scale)
	cl, err := client.New(o.Addr, client.Options{})
	if err != nil {
		return nil, err
	}
	res := &Result{Options: o, Report: &bench.Report{}}
	res.Report.Human = bench.HumanColumns["e2e"]
	modes := []string{ModeRecompute, ModeLocal, ModePool}
	pooled := make([]ModeResult, len(modes))
	var roundRatios []float64
	for r := range o.Rounds {
		means := map[string]float64{}
		for i := range modes {
			k := (i + r) % len(modes)
			mr, err := replayE2E(ctx, o, cl, model, modes[k], sample)
			if err != nil {
				return nil, err
			}
			means[modes[k]] = meanSeconds(mr.TTFT)
			p := &pooled[k]
			p.Mode = mr.Mode
			p.TTFT = append(p.TTFT, mr.TTFT...)
			p.Results = append(p.Results, mr.Results...)
			p.Stats = append(p.Stats, mr.Stats...)
			p.Adapter = append(p.Adapter, mr.Adapter...)
			p.Failed += mr.Failed
		}
		if means[ModeLocal] > 0 {
			roundRatios = append(roundRatios, means[ModePool]/means[ModeLocal])
		}
	}
	for _, p := range pooled {
		slices.Sort(p.TTFT)
		res.Modes = append(res.Modes, p)
	}
	var local float64
	for _, mr := range res.Modes {
		row := e2eRow(o, mr)
		if mr.Mode == ModeLocal {
			local = row["ttft_mean_s"].(float64)
		}
		if mr.Mode == ModePool && local > 0 {
			mean := row["ttft_mean_s"].(float64)
			row["baseline"] = ModeLocal
			row["baseline_ttft_mean_s"] = local
			row["ttft_vs_baseline"] = mean / local
			row["ratio"] = local / mean // speed-up: higher is better
			row["rounds"] = o.Rounds
			row["round_ttft_vs_baseline"] = roundRatios
		}
		res.Report.Add(row)
	}
	loads, err := measureAdapterLoad(ctx, o, cl)
	if err != nil {
		return nil, err
	}
	for _, r := range loads {
		res.Report.Add(r)
	}
	d, err := measureDisagg(ctx, o, cl, model)
	if err != nil {
		return nil, err
	}
	if o.Progress != nil {
		o.Progress.Add(1)
	}
	res.Report.Add(d)
	return res, nil
}

func replayE2E(ctx context.Context, o Options, cl *client.Client, model *scheduler.PrefillModel, mode string, sample []e2eRequest) (ModeResult, error) {
	mr := ModeResult{Mode: mode}
	// A namespace per run and mode: nothing from an earlier replay hits.
	ns := fmt.Sprintf("bench/e2e-%d", time.Now().UnixNano())
	engines := make([]*enginesim.Engine, o.Engines)
	conns := make([]*adapter.Connector, o.Engines)
	runCtx, stop := context.WithCancel(ctx)
	var loops sync.WaitGroup
	defer func() {
		stop()
		loops.Wait()
		for _, c := range conns {
			if c != nil {
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				c.Close(cctx)
				cancel()
			}
		}
	}()
	for i := range engines {
		eo := enginesim.Options{
			Name: fmt.Sprintf("%s-%d", mode, i), Layout: o.Layout, Namespace: ns, PoolBlocks: o.PoolBlocks,
			DisablePrefixCache: mode == ModeRecompute, Prefill: model, TimeScale: o.TimeScale,
			MaxWaiting: len(sample), MaxTokens: o.MaxOutput, Logger: o.Logger, DisableLoadIfFaster: o.LoadAlways,
		}
		if mode == ModePool {
			c, err := adapter.New(adapter.Options{Client: cl, Namespace: ns, Layout: o.Layout, Logger: o.Logger})
			if err != nil {
				return mr, err
			}
			conns[i], eo.Connector = c, c
		}
		e, err := enginesim.New(eo)
		if err != nil {
			return mr, err
		}
		engines[i] = e
		loops.Go(func() { e.Run(runCtx) })
	}
	results := make([]enginesim.Result, len(sample))
	errs := make([]error, len(sample))
	var wg sync.WaitGroup
	start := time.Now()
	for i, r := range sample {
		if err := sleepUntil(ctx, start.Add(time.Duration(float64(r.at)/o.Scale))); err != nil {
			return mr, err
		}
		// Round robin: the same routing in every mode, blind to caches,
		// so turns of a conversation land on different engines.
		e := engines[i%len(engines)]
		wg.Go(func() {
			results[i], errs[i] = e.Submit(ctx, enginesim.Request{Tokens: r.tokens, MaxTokens: r.output})
			if o.Progress != nil {
				o.Progress.Add(1)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			mr.Failed++
			continue
		}
		mr.Results = append(mr.Results, results[i])
		mr.TTFT = append(mr.TTFT, results[i].TTFT)
	}
	slices.Sort(mr.TTFT)
	for i, e := range engines {
		mr.Stats = append(mr.Stats, e.Stats())
		if conns[i] != nil {
			mr.Adapter = append(mr.Adapter, conns[i].Stats())
		}
	}
	return mr, ctx.Err()
}

func meanSeconds(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum.Seconds() / float64(len(ds))
}

func ttftQuantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))].Seconds()
}

func e2eRow(o Options, mr ModeResult) bench.Row {
	var sum time.Duration
	for _, t := range mr.TTFT {
		sum += t
	}
	mean := 0.0
	if len(mr.TTFT) > 0 {
		mean = sum.Seconds() / float64(len(mr.TTFT))
	}
	var prompt, local, pool, computed, recomputed, skipped, wrong, loadBytes int64
	var loadTime, stall time.Duration
	tiers := map[string]int64{}
	for _, s := range mr.Stats {
		prompt += s.PromptTokens
		local += s.LocalHitTokens
		pool += s.PoolHitTokens
		computed += s.ComputedTokens
		recomputed += s.RecomputedTokens
		skipped += s.SkippedLoadTokens
		wrong += s.WrongKV
		loadBytes += s.LoadBytes
		loadTime += s.LoadTime
		stall += s.LoadStall
		for t, v := range s.PoolTierTokens {
			tiers[t] += v
		}
	}
	var saveBytes, dropped int64
	for _, a := range mr.Adapter {
		saveBytes += a.SavedBytes
		dropped += a.Dropped
	}
	overlap := 0.0
	if loadTime > 0 {
		overlap = 1 - stall.Seconds()/loadTime.Seconds()
	}
	saved := local + pool
	frac := 0.0
	if prompt > 0 {
		frac = float64(saved) / float64(prompt)
	}
	return bench.Row{
		"name": "e2e", "mode": mr.Mode, "requests": len(mr.TTFT), "failed": mr.Failed, "engines": o.Engines,
		"ttft_mean_s": mean, "ttft_p50_s": ttftQuantile(mr.TTFT, 0.5), "ttft_p90_s": ttftQuantile(mr.TTFT, 0.9), "ttft_p99_s": ttftQuantile(mr.TTFT, 0.99),
		"prompt_tokens": prompt, "saved_tokens": saved, "saved_frac": frac, "computed_tokens": computed,
		"hit_hbm_tokens": local, "hit_dram_tokens": tiers["dram"], "hit_ssd_tokens": tiers["ssd"], "hit_remote_tokens": tiers[adapter.TierRemote],
		"recomputed_tokens": recomputed, "skipped_load_tokens": skipped, "wrong_kv": wrong, "load_bytes": loadBytes, "save_bytes": saveBytes, "save_dropped": dropped,
		"load_s": loadTime.Seconds(), "load_stall_s": stall.Seconds(), "overlap_frac": overlap,
		"time_scale": o.TimeScale, "scale": o.Scale, "offered_load": o.offered, "pool_blocks": o.PoolBlocks,
	}
}

// measureAdapterLoad times adapter Loads of a stored prefix against a raw
// multi-get of the same bytes stored as whole blocks (the cheapest way to
// get them out of the node over HTTP), for the run's layout and for a real
// one (Llama-3-8B, 256-token blocks). The adapter uses shared memory when
// the node is on this host; the row also has the adapter over HTTP alone
// and the raw read of the whole blocks through a shared-memory session.
func measureAdapterLoad(ctx context.Context, o Options, cl *client.Client) ([]bench.Row, error) {
	real8b, _ := adapter.Preset("llama-3-8b", 256)
	cases := []struct {
		layout adapter.Layout
		blocks int
	}{{o.Layout, o.LoadBlocks}, {real8b, 4}}
	if o.OnlyRunLayout {
		cases = cases[:1]
	}
	dur := time.Second
	if o.Quick {
		dur = 300 * time.Millisecond
	}
	var rows []bench.Row
	for _, tc := range cases {
		l := tc.layout
		ns := fmt.Sprintf("bench/load-%d", time.Now().UnixNano())
		c, err := adapter.New(adapter.Options{Client: cl, Namespace: ns, Layout: l, SaveStagingBytes: max(64<<20, int64(tc.blocks)*l.LayerBytes()), Logger: o.Logger})
		if err != nil {
			return nil, err
		}
		toks := make([]uint32, tc.blocks*l.BlockTokens)
		for i := range toks {
			toks[i] = uint32(i)
		}
		plan, err := c.Lookup(ctx, toks)
		if err != nil {
			c.Close(ctx)
			return nil, err
		}
		mem := make([]byte, int64(tc.blocks)*l.BlockBytes())
		buf := flatTarget{l: l, mem: mem}
		for b, k := range plan.Keys {
			for layer := range l.Layers {
				enginesim.Fill(buf.Region(b, layer), k, layer)
			}
		}
		sv := c.Save(plan)
		for layer := range l.Layers {
			sv.LayerWait(ctx, layer, buf)
		}
		c.Flush(ctx)
		whole := make([]block.Key, tc.blocks)
		for i := range whole {
			whole[i] = block.OpaqueKey(ns, fmt.Appendf(nil, "whole/%d", i))
			if _, err := cl.Put(ctx, ns, whole[i], mem[int64(i)*l.BlockBytes():int64(i+1)*l.BlockBytes()]); err != nil {
				c.Close(ctx)
				return nil, err
			}
		}
		if plan, err = c.Lookup(ctx, toks); err != nil || plan.HitBlocks != tc.blocks {
			c.Close(ctx)
			return nil, fmt.Errorf("bench: adapter_load: stored %d of %d blocks: %v", plan.HitBlocks, tc.blocks, err)
		}
		total := int64(len(mem))
		ch, err := adapter.New(adapter.Options{Client: cl, Namespace: ns, Layout: l, DisableShm: true, Logger: o.Logger})
		if err != nil {
			c.Close(ctx)
			return nil, err
		}
		st, err := cl.OpenStaging(ctx, total+int64(tc.blocks)<<12)
		if err != nil {
			st = nil // the node is elsewhere or has shared memory off
		}
		closeAll := func() {
			c.Close(ctx)
			ch.Close(ctx)
			if st != nil {
				st.Close()
			}
		}
		sizes := make([]int64, tc.blocks)
		for i := range sizes {
			sizes[i] = l.BlockBytes()
		}
		intoMem := func(i *int) func(f client.Frame, r io.Reader) error {
			return func(f client.Frame, r io.Reader) error {
				off := int64(*i) * l.BlockBytes()
				*i++
				_, err := io.ReadFull(r, mem[off:off+f.Length])
				return err
			}
		}
		// Interleave them all so the machine's load hits each alike; the
		// first round warms up (sessions opened, segments touched) and is
		// not counted.
		var adapterT, httpT, rawT, shmT time.Duration
		n := -1
		for adapterT+rawT < 2*dur || n < 3 {
			if n == 0 {
				adapterT, httpT, rawT, shmT = 0, 0, 0, 0
			}
			for _, x := range []struct {
				c *adapter.Connector
				t *time.Duration
			}{{c, &adapterT}, {ch, &httpT}} {
				t0 := time.Now()
				res, _ := x.c.Load(ctx, plan, buf).Result(ctx)
				*x.t += time.Since(t0)
				if res.Blocks != tc.blocks {
					closeAll()
					return nil, fmt.Errorf("bench: adapter_load: loaded %d of %d blocks: %v", res.Blocks, tc.blocks, res.Err)
				}
			}
			if st != nil {
				t0 := time.Now()
				i := 0
				err := st.GetBatch(ctx, ns, whole, sizes, intoMem(&i))
				shmT += time.Since(t0)
				if err != nil {
					closeAll()
					return nil, err
				}
			}
			t0 := time.Now()
			i := 0
			err := cl.GetBatch(ctx, ns, whole, intoMem(&i))
			rawT += time.Since(t0)
			if err != nil {
				closeAll()
				return nil, err
			}
			n++
		}
		transport := "http"
		if c.Stats().ShmLoadRequests > 0 {
			transport = "shm"
		}
		closeAll()
		rate := func(d time.Duration) float64 { return float64(total) * float64(n) / d.Seconds() / 1e9 }
		gbps, base := rate(adapterT), rate(rawT)
		row := bench.Row{
			"name": "adapter_load", "layout": l.Name, "block_bytes": l.BlockBytes(), "layer_bytes": l.LayerBytes(), "blocks": tc.blocks,
			"groups": l.Groups(), "group_bytes": l.GroupBytes(0), "transport": transport,
			"loads": n, "gbps": gbps, "baseline": "whole_block_multiget", "baseline_gbps": base, "ratio": gbps / base,
			"http_gbps": rate(httpT), "http_ratio": rate(httpT) / base,
		}
		if st != nil {
			row["shm_baseline_gbps"] = rate(shmT)
			row["ratio_vs_shm_baseline"] = gbps / rate(shmT)
		}
		rows = append(rows, row)
		if o.Progress != nil {
			o.Progress.Add(1)
		}
	}
	return rows, nil
}

// flatTarget lays blocks out one after another, layers inside, in plain
// memory.
type flatTarget struct {
	l   adapter.Layout
	mem []byte
}

func (t flatTarget) Region(blk, layer int) []byte {
	off := int64(blk)*t.l.BlockBytes() + int64(layer)*t.l.LayerBytes()
	return t.mem[off : off+t.l.LayerBytes()]
}

func (t flatTarget) CopyLayer(blk, layer int, dst []byte) error {
	copy(dst, t.Region(blk, layer))
	return nil
}

// measureDisagg runs prefill/decode disaggregation on a few long prompts: a
// prefill instance computes layer by layer (the run's time scale) and saves
// each layer as it completes; a decode instance loads each layer as soon as
// it is stored. The transfer a decode instance would otherwise start after
// the prefill is measured right after on the same blocks; the hidden
// fraction is the part of it the streaming took off the critical path.
func measureDisagg(ctx context.Context, o Options, cl *client.Client, model *scheduler.PrefillModel) (bench.Row, error) {
	l := o.Layout
	if l.GroupLayers == 0 {
		// What remains exposed is the last group's transfer: a
		// disaggregated deployment stores smaller groups than the
		// default (sim-70b: 10 groups of 8 layers rather than 3).
		l.GroupLayers = min(l.Layers, 8)
	}
	prompts := 4
	if o.Quick {
		prompts = 2
	}
	tokensN := min(o.MaxInput, 8192)
	blocks := tokensN / l.BlockTokens
	var prefillT, exposedT, refT time.Duration
	for p := range prompts {
		ns := fmt.Sprintf("bench/disagg-%d", time.Now().UnixNano())
		mk := func() (*adapter.Connector, error) {
			return adapter.New(adapter.Options{Client: cl, Namespace: ns, Layout: l, Logger: o.Logger})
		}
		pre, err := mk()
		if err != nil {
			return nil, err
		}
		dec, err := mk()
		if err != nil {
			return nil, err
		}
		toks := make([]uint32, blocks*l.BlockTokens)
		for i := range toks {
			toks[i] = uint32(p<<24 + i)
		}
		plan, _ := pre.Lookup(ctx, toks)
		src := flatTarget{l: l, mem: make([]byte, int64(blocks)*l.BlockBytes())}
		dst := flatTarget{l: l, mem: make([]byte, len(src.mem))}
		sv := pre.Save(plan)
		start := time.Now()
		ld := dec.LoadStream(ctx, plan.Keys, dst, func(ctx context.Context, layer int) error {
			select {
			case <-sv.Stored(layer):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		perLayer := time.Duration(model.Seconds(len(toks), 0) * o.TimeScale * float64(time.Second) / float64(l.Layers))
		for layer := range l.Layers {
			time.Sleep(perLayer)
			for b, k := range plan.Keys {
				enginesim.Fill(src.Region(b, layer), k, layer)
			}
			sv.LayerWait(ctx, layer, src)
		}
		prefillEnd := time.Since(start)
		res, _ := ld.Result(ctx)
		ready := time.Since(start)
		if res.Blocks != blocks {
			pre.Close(ctx)
			dec.Close(ctx)
			return nil, fmt.Errorf("bench: disagg: streamed %d of %d blocks: %v", res.Blocks, blocks, res.Err)
		}
		pre.Flush(ctx)
		// The same transfer, started after the prefill.
		t0 := time.Now()
		ref, _ := dec.Load(ctx, adapter.Plan{Keys: plan.Keys, HitBlocks: blocks}, dst).Result(ctx)
		refT += time.Since(t0)
		if ref.Blocks != blocks {
			pre.Close(ctx)
			dec.Close(ctx)
			return nil, fmt.Errorf("bench: disagg: reference load got %d of %d blocks: %v", ref.Blocks, blocks, ref.Err)
		}
		prefillT += prefillEnd
		exposedT += max(0, ready-prefillEnd)
		pre.Close(ctx)
		dec.Close(ctx)
	}
	hidden := 0.0
	if refT > 0 {
		hidden = max(0, 1-exposedT.Seconds()/refT.Seconds())
	}
	n := float64(prompts)
	return bench.Row{
		"name": "disagg", "layout": l.Name, "groups": l.Groups(), "prompts": prompts, "prompt_tokens": blocks * l.BlockTokens,
		"prefill_s": prefillT.Seconds() / n, "transfer_s": refT.Seconds() / n, "exposed_s": exposedT.Seconds() / n,
		"hidden_frac": hidden, "time_scale": o.TimeScale,
	}, nil
}

// sleepUntil waits until t (at once if it has passed) or until ctx ends:
// a replay's requests leave at their arrival times, scaled.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
