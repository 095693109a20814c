package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/router"
)

// The engines' model: sim-70b (1280 bytes of KV per token, so a pool of
// 256 blocks is 5 MiB), with vLLM's 16-token blocks, which the router keys
// its prompts with too.
const (
	soakModel       = "sim-70b"
	soakEngineNS    = "soak/sim-70b"
	soakBlockTokens = 16
)

// Router is what the router part of a soak measured: engine
// simulators (`yuebing engine-sim`) publishing KV events to a standalone
// router (`yuebing conductor` with engines), OpenAI traffic through the
// router, and an engine killed (SIGKILL) and restarted on a schedule.
type Router struct {
	Engines int
	// Requests counts the soak's requests to the router; Status counts
	// them by outcome: the HTTP status ("200", "429", "503"), or a
	// transport error's kind (conn_refused, timeout, ...), or for a 200
	// whose body was not a whole answer "stream_cut" (a stream that ended
	// without [DONE]) and "bad_answer".
	Requests int64
	Status   map[string]int64
	// ByKind counts requests by shape: completion, completion_stream,
	// chat, chat_stream.
	ByKind map[string]int64
	// ServedBy counts answered requests by the engine the router named
	// (X-Yuebing-Engine).
	ServedBy map[string]int64
	// PrefixHits counts answers whose X-Yuebing-Prefix-Tokens was above
	// zero, by shape. PrefixTokens sums that header over the completions
	// of token ids, and PromptTokens their lengths: the share of the
	// prompts the router found cached. (A chat is tokenized by the router
	// one way and by the simulator, one token per byte, another, so only
	// the router's own recent decisions match it.)
	PrefixHits                 map[string]int64
	PrefixTokens, PromptTokens int64
	// EngineKills counts kill -9s of engines, RestartRetries the failed
	// restarts retried. Recovered counts restarted engines that served a
	// request through the router again; RecoveredWithHits those whose
	// first such request the router placed on a prefix it knew from the
	// new process's KV events. MaxRecovery is the longest time from a kill
	// to that request.
	EngineKills, RestartRetries, Recovered, RecoveredWithHits int
	MaxRecovery                                               time.Duration
	// RouterMetrics are the router's own counters at the end, summed over
	// engines: engine restarts seen in the KV events' sequence numbers,
	// events stored and removed, gaps, malformed batches, retries and
	// engine failures.
	RouterMetrics map[string]float64
	// Faults, each failing the soak: Bad5xx counts answers 5xx other than
	// 503; Outside503 counts 503s while no engine was out; BadAnswers
	// counts cut or malformed answers while no engine was out;
	// Unrecovered counts restarted engines that served nothing through
	// the router within RestartFor; RouterExited says the router's
	// process ended.
	Bad5xx, Outside503, BadAnswers int64
	Unrecovered                    int
	RouterExited                   bool
	// Faults describes the first few.
	Faults []string
}

// Failed says whether the router part found a fault.
func (r *Router) Failed() bool {
	return r.Bad5xx > 0 || r.Outside503 > 0 || r.BadAnswers > 0 || r.Unrecovered > 0 || r.RouterExited
}

// soakRouter runs the engines, the router and their load.
type soakRouter struct {
	s       *soak
	engines []*bench.Proc
	urls    []string // engines' HTTP bases, fixed after the first start
	router  *bench.Proc
	url     string
	hc      *http.Client

	// outages is the number of engines out (from the kill until the
	// restarted engine served a request through the router); outageGen
	// changes at each start and end of one, so that a request that
	// overlapped an outage is told from one that did not.
	outages   atomic.Int32
	outageGen atomic.Int64
	probeSeq  atomic.Uint64

	requests, prefixTokens, promptTokens atomic.Int64
	bad5xx, outside503, badAnswers       atomic.Int64

	mu                                      sync.Mutex
	status, byKind, servedBy, prefixHits    map[string]int64
	faults                                  []string
	kills, retries, recovered, recoveredHit int
	unrecovered                             int
	maxRecovery                             time.Duration
}

// startRouter starts o.Engines engine simulators and the router in front
// of them, and waits until the router follows every engine's KV events.
func (s *soak) startRouter(ctx context.Context, dir string, env []string) error {
	o := &s.o
	rt := &soakRouter{s: s, status: map[string]int64{}, byKind: map[string]int64{}, servedBy: map[string]int64{}, prefixHits: map[string]int64{},
		hc: &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     30 * time.Second,
		}}}
	s.rt = rt
	openLog := func(name string) (*os.File, error) {
		return os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}
	routerArgs := []string{"conductor", "--listen", "127.0.0.1:0", "--model", soakModel, "--namespace", soakEngineNS,
		"--block-size", strconv.Itoa(soakBlockTokens),
		// Probes of 1 s may take half of it; three unanswered in a row
		// take an engine out, a refused connection at once.
		"--probe-interval", "1s"}
	for i := range o.Engines {
		name := fmt.Sprintf("e%d", i)
		lf, err := openLog(name)
		if err != nil {
			return err
		}
		p := &bench.Proc{Name: name, Bin: o.Binary, Env: env, Log: lf, Parse: parseEngineBanner,
			Args: []string{"engine-sim", "--listen", "127.0.0.1:0",
				"--kv-events", "tcp://127.0.0.1:0", "--kv-replay", "tcp://127.0.0.1:0",
				"--name", name, "--layout", soakModel, "--block-tokens", strconv.Itoa(soakBlockTokens),
				"--namespace", soakEngineNS, "--pool-blocks", "256",
				// A 256-token prefill in about 5 ms, a token every 1.5 ms.
				"--time-scale", "0.05", "--max-tokens", "64"}}
		rt.engines = append(rt.engines, p)
		m, _, err := p.Start(ctx, o.RestartFor)
		if err != nil {
			return err
		}
		httpAddr := strings.TrimPrefix(m["http"], "http://")
		p.PinFlag("--listen", httpAddr)
		p.PinFlag("--kv-events", m["kv-events"])
		p.PinFlag("--kv-replay", m["kv-replay"])
		rt.urls = append(rt.urls, "http://"+httpAddr)
		routerArgs = append(routerArgs, "--engine",
			fmt.Sprintf("id=%s,url=http://%s,events=%s,replay=%s", name, httpAddr, m["kv-events"], m["kv-replay"]))
	}
	lf, err := openLog("router")
	if err != nil {
		return err
	}
	rt.router = &bench.Proc{Name: "router", Bin: o.Binary, Env: env, Log: lf, Args: routerArgs, Parse: func(line string, m map[string]string) bool {
		addr, ok := strings.CutPrefix(line, "conductor listening on ")
		if ok {
			m["http"] = strings.TrimSpace(addr)
		}
		return ok
	}}
	m, _, err := rt.router.Start(ctx, o.RestartFor)
	if err != nil {
		return err
	}
	rt.url = m["http"]
	return rt.waitEvents(ctx, 60*time.Second)
}

// parseEngineBanner reads `yuebing engine-sim`'s banner ("  http
// http://...", "  kv-events  tcp://...", ..., "  ready").
func parseEngineBanner(line string, m map[string]string) bool {
	f := strings.Fields(line)
	if len(f) >= 2 {
		m[f[0]] = f[1]
	}
	return len(f) == 1 && f[0] == "ready"
}

// stop ends the router and the engines.
func (rt *soakRouter) stop() {
	if rt.router != nil {
		rt.router.Stop()
	}
	for _, e := range rt.engines {
		e.Stop()
	}
}

// waitEvents waits until the router has stored events from every engine:
// a prompt sent to each engine directly, again each round since ZMQ drops
// what a subscriber not yet connected would have read.
func (rt *soakRouter) waitEvents(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		m, err := rt.routerMetrics(ctx)
		left := 0
		for i, e := range rt.engines {
			if m[bench.StoredEventsSeries(e.Name)] > 0 {
				continue
			}
			left++
			rt.direct(ctx, i, rt.uniquePrompt(2))
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("bench: soak: the router follows the KV events of %d of %d engines after %s (%v)", len(rt.engines)-left, len(rt.engines), d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// uniquePrompt is blocks blocks' worth of token ids no other prompt of the
// soak shares.
func (rt *soakRouter) uniquePrompt(blocks int) []int {
	n := rt.probeSeq.Add(1)
	toks := make([]int, blocks*soakBlockTokens)
	for i := range toks {
		// Above the load's token ids (< 50,000).
		toks[i] = 100_000 + int(n%100_000)*64 + i
	}
	return toks
}

// direct runs a prompt on engine i without the router, for one token.
func (rt *soakRouter) direct(ctx context.Context, i int, toks []int) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := rt.post(cctx, rt.urls[i]+"/v1/completions", completionBody(toks, 1, false))
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("engine %s answered %d", rt.engines[i].Name, resp.StatusCode)
	}
	return nil
}

func (rt *soakRouter) post(ctx context.Context, url string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return rt.hc.Do(req)
}

func completionBody(toks []int, maxTokens int, stream bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"model":%q,"max_tokens":%d,"stream":%t,"prompt":[`, soakModel, maxTokens, stream)
	for i, t := range toks {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(t))
	}
	b.WriteString("]}")
	return b.Bytes()
}

func chatBody(system, user string, maxTokens int, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{
		"model": soakModel, "max_tokens": maxTokens, "stream": stream,
		"messages": []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": user}},
	})
	return b
}

// routerMetrics reads the router's own series (routerSeries).
func (rt *soakRouter) routerMetrics(ctx context.Context) (map[string]float64, error) {
	return bench.RouterSeries(ctx, rt.hc, rt.url)
}

// soakPrefixes are the shared prefixes of the token-id prompts, and
// soakSystems the system prompts of the chats: a few each, so that most
// requests share a prefix with many others.
func soakPrefixes(seed uint64) [][]int {
	rng := soakRand(seed, 1<<20)
	out := make([][]int, 8)
	for i := range out {
		p := make([]int, (4+rng.IntN(13))*soakBlockTokens) // 64-256 tokens
		for j := range p {
			p[j] = 1 + rng.IntN(50_000)
		}
		out[i] = p
	}
	return out
}

var soakWords = strings.Fields(`the cache holds each block of a prompt's keys and values so that a later
request with the same prefix loads them instead of computing them again; the router sends a request to the
engine whose cache holds the longest prefix unless its queue is too long`)

func soakSystems(seed uint64) []string {
	rng := soakRand(seed, 1<<21)
	out := make([]string, 4)
	for i := range out {
		var b strings.Builder
		fmt.Fprintf(&b, "You are assistant %d of the soak.", i)
		for range 60 + rng.IntN(120) {
			b.WriteByte(' ')
			b.WriteString(soakWords[rng.IntN(len(soakWords))])
		}
		out[i] = b.String()
	}
	return out
}

// runRouterWorker sends OpenAI requests through the router until ctx
// ends: completions of token ids and chats, streamed and not, each on one
// of a few shared prefixes.
func (rt *soakRouter) runRouterWorker(ctx context.Context, id int) {
	rng := soakRand(rt.s.o.Seed, 1000+id)
	prefixes, systems := soakPrefixes(rt.s.o.Seed), soakSystems(rt.s.o.Seed)
	for ctx.Err() == nil {
		stream := rng.IntN(2) == 0
		maxTokens := 1 + rng.IntN(16)
		var body []byte
		kind := "completion"
		prompt := 0
		if rng.IntN(3) == 0 {
			kind = "chat"
			var u strings.Builder
			for range 5 + rng.IntN(40) {
				u.WriteString(soakWords[rng.IntN(len(soakWords))])
				u.WriteByte(' ')
			}
			fmt.Fprintf(&u, "(%d)", rng.Uint64())
			body = chatBody(systems[rng.IntN(len(systems))], u.String(), maxTokens, stream)
		} else {
			toks := slices.Clone(prefixes[rng.IntN(len(prefixes))])
			for range 8 + rng.IntN(41) {
				toks = append(toks, 1+rng.IntN(50_000))
			}
			prompt = len(toks)
			body = completionBody(toks, maxTokens, stream)
		}
		if stream {
			kind += "_stream"
		}
		if err := rt.call(ctx, kind, body, stream, prompt); err != nil && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// call sends one request to the router and records its outcome.
func (rt *soakRouter) call(ctx context.Context, kind string, body []byte, stream bool, prompt int) error {
	path := "/v1/completions"
	if strings.HasPrefix(kind, "chat") {
		path = "/v1/chat/completions"
	}
	gen0, out0 := rt.outageGen.Load(), rt.outages.Load()
	cctx, cancel := opCtx(ctx)
	defer cancel()
	outcome, detail, engine, prefix, err := rt.exchange(cctx, rt.url+path, body, stream)
	if err != nil && ctx.Err() != nil {
		return err // cut by the end of the soak
	}
	inOutage := out0 > 0 || rt.outages.Load() > 0 || rt.outageGen.Load() != gen0
	rt.requests.Add(1)
	if prompt > 0 {
		rt.promptTokens.Add(int64(prompt))
		rt.prefixTokens.Add(int64(prefix))
	}
	code, _ := strconv.Atoi(outcome)
	fault := ""
	switch {
	case code >= 500 && code != http.StatusServiceUnavailable:
		rt.bad5xx.Add(1)
		fault = fmt.Sprintf("%s answered %d: %s", kind, code, detail)
	case code == http.StatusServiceUnavailable && !inOutage:
		rt.outside503.Add(1)
		fault = fmt.Sprintf("%s answered 503 with every engine up: %s", kind, detail)
	case (outcome == "stream_cut" || outcome == "bad_answer") && !inOutage:
		rt.badAnswers.Add(1)
		fault = fmt.Sprintf("%s: %s with every engine up: %s", kind, outcome, detail)
	}
	rt.mu.Lock()
	rt.status[outcome]++
	rt.byKind[kind]++
	if engine != "" && code == http.StatusOK {
		rt.servedBy[engine]++
	}
	if prefix > 0 {
		rt.prefixHits[kind]++
	}
	rt.mu.Unlock()
	if fault != "" {
		rt.fault(fault)
	}
	return err
}

func (rt *soakRouter) fault(msg string) {
	msg = fmt.Sprintf("%s: %s", time.Since(rt.s.start).Round(time.Millisecond), msg)
	rt.mu.Lock()
	if len(rt.faults) < 20 {
		rt.faults = append(rt.faults, msg)
	}
	rt.mu.Unlock()
	rt.s.logf("ROUTER FAULT %s", msg)
}

// exchange runs one request and names its outcome: the status code, or
// an error's kind, or for a 200 whose answer is not whole "stream_cut" or
// "bad_answer"; detail says more for a failure.
func (rt *soakRouter) exchange(ctx context.Context, url string, body []byte, stream bool) (outcome, detail, engine string, prefix int, err error) {
	resp, err := rt.post(ctx, url, body)
	if err != nil {
		return errorKind(err), err.Error(), "", 0, err
	}
	defer resp.Body.Close()
	engine = resp.Header.Get(router.HeaderEngine)
	prefix, _ = strconv.Atoi(resp.Header.Get(router.HeaderPrefixTokens))
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	outcome = strconv.Itoa(resp.StatusCode)
	if resp.StatusCode != http.StatusOK {
		return outcome, string(bytes.TrimSpace(data[:min(len(data), 300)])), engine, prefix, fmt.Errorf("router answered %d", resp.StatusCode)
	}
	if stream {
		if rerr != nil || !bytes.HasSuffix(bytes.TrimSpace(data), []byte("data: [DONE]")) {
			return "stream_cut", fmt.Sprintf("%d bytes from %s, no [DONE] (%v)", len(data), engine, rerr), engine, prefix, errors.New("stream cut")
		}
		return outcome, "", engine, prefix, nil
	}
	var a struct {
		Choices []json.RawMessage `json:"choices"`
	}
	if rerr != nil || json.Unmarshal(data, &a) != nil || len(a.Choices) == 0 {
		return "bad_answer", fmt.Sprintf("%d bytes from %s: %.100q (%v)", len(data), engine, data, rerr), engine, prefix, errors.New("bad answer")
	}
	return outcome, "", engine, prefix, nil
}

// killLoop kills an engine every EngineKillEvery, the first half a period
// in (between the nodes' kills), each in turn, and restarts it.
func (rt *soakRouter) killLoop(ctx, loadCtx context.Context) error {
	every := rt.s.o.EngineKillEvery
	next := time.NewTimer(every / 2)
	defer next.Stop()
	for turn := 0; ; turn++ {
		select {
		case <-loadCtx.Done():
			return nil
		case <-next.C:
		}
		next.Reset(every)
		if deadline, ok := loadCtx.Deadline(); ok && time.Until(deadline) < min(every/2, 10*time.Second) {
			continue
		}
		if err := rt.killAndRestart(ctx, turn%len(rt.engines)); err != nil {
			return err
		}
	}
}

// killAndRestart kills engine i with SIGKILL under load, restarts it on
// its addresses, and waits until the router has it serve a request again:
// each round a prompt of its own is run on the restarted engine directly,
// whose KV events tell the router the engine holds it, then the same
// prompt, one token longer, is sent through the router, until the router
// places one on the engine (bounded by RestartFor). The engine counts as
// out from the kill until then.
func (rt *soakRouter) killAndRestart(ctx context.Context, i int) error {
	e := rt.engines[i]
	rt.outages.Add(1)
	rt.outageGen.Add(1)
	defer func() {
		rt.outageGen.Add(1)
		rt.outages.Add(-1)
	}()
	t0 := time.Now()
	e.Kill()
	rt.s.logf("killed engine %s (kill -9)", e.Name)
	_, retries, err := e.Start(ctx, rt.s.o.RestartFor)
	rt.mu.Lock()
	rt.kills++
	rt.retries += retries
	rt.mu.Unlock()
	if err != nil {
		rt.mu.Lock()
		rt.unrecovered++
		rt.mu.Unlock()
		rt.fault(fmt.Sprintf("engine %s did not restart: %v", e.Name, err))
		return err
	}
	deadline := time.Now().Add(rt.s.o.RestartFor)
	for ctx.Err() == nil {
		toks := rt.uniquePrompt(2)
		if err := rt.direct(ctx, i, toks); err == nil {
			time.Sleep(50 * time.Millisecond) // for its events to reach the router
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			outcome, _, engine, prefix, _ := rt.exchange(cctx, rt.url+"/v1/completions", completionBody(append(toks, 7), 1, false), false)
			cancel()
			if outcome == "200" && engine == e.Name {
				d := time.Since(t0)
				rt.mu.Lock()
				rt.recovered++
				if prefix > 0 {
					rt.recoveredHit++
				}
				rt.maxRecovery = max(rt.maxRecovery, d)
				rt.mu.Unlock()
				rt.s.logf("engine %s serves through the router again %s after its kill (%d retries; prefix %d tokens)", e.Name, d.Round(time.Millisecond), retries, prefix)
				return nil
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ctx.Err() == nil {
		rt.mu.Lock()
		rt.unrecovered++
		rt.mu.Unlock()
		rt.fault(fmt.Sprintf("engine %s restarted but served nothing through the router within %s", e.Name, rt.s.o.RestartFor))
	}
	return nil
}

// result gathers the figures at the end, reading the router's counters
// while it still runs.
func (rt *soakRouter) result(ctx context.Context) *Router {
	r := &Router{Engines: len(rt.engines), Requests: rt.requests.Load(),
		PrefixTokens: rt.prefixTokens.Load(), PromptTokens: rt.promptTokens.Load(),
		Bad5xx: rt.bad5xx.Load(), Outside503: rt.outside503.Load(), BadAnswers: rt.badAnswers.Load(),
		RouterExited: rt.router.Exited(), RouterMetrics: map[string]float64{}}
	if r.RouterExited {
		rt.fault("the router's process exited: " + bench.LogTail(rt.router.Log.Name(), 0))
	} else if m, err := rt.routerMetrics(ctx); err == nil {
		for k, v := range m {
			name, labels, _ := strings.Cut(k, "{")
			switch name {
			case "yuebing_router_events_total":
				if _, kind, ok := strings.Cut(labels, `kind="`); ok {
					name += "{" + strings.TrimSuffix(kind, `"}`) + "}"
				}
			case "yuebing_router_engine_restarts_total", "yuebing_router_event_gaps_total", "yuebing_router_event_gaps_unrecovered_total",
				"yuebing_router_events_malformed_total", "yuebing_router_retries_total", "yuebing_router_engine_failures_total",
				"yuebing_router_probe_misses_total":
			default:
				continue
			}
			r.RouterMetrics[strings.TrimPrefix(name, "yuebing_router_")] += v
		}
	} else {
		rt.fault(fmt.Sprintf("reading the router's /metrics at the end: %v", err))
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	r.Status, r.ByKind, r.ServedBy, r.PrefixHits = maps.Clone(rt.status), maps.Clone(rt.byKind), maps.Clone(rt.servedBy), maps.Clone(rt.prefixHits)
	r.EngineKills, r.RestartRetries, r.Recovered, r.RecoveredWithHits = rt.kills, rt.retries, rt.recovered, rt.recoveredHit
	r.Unrecovered, r.MaxRecovery = rt.unrecovered, rt.maxRecovery
	r.Faults = slices.Clone(rt.faults)
	return r
}
