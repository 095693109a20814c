package router

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/kvevents"
	"github.com/yuebing/yuebing/kvevents/kveventstest"
	"github.com/yuebing/yuebing/scheduler"
)

const (
	testModel = "m"
	testNS    = "acme/m"
	testBS    = 16
)

// simEngine simulates an engine's HTTP face for router tests (no LLM can
// run here): it answers completions with fixed text, streamed as vLLM
// streams them when asked, and serves vLLM's queue gauges.
type simEngine struct {
	srv    *httptest.Server
	served atomic.Int64
	// failNext makes the next completion fail: "500" answers a server
	// error, "close" drops the connection before answering.
	failNext atomic.Value
	// headers are the last completion request's headers.
	headers atomic.Value
}

func newSimEngine(t *testing.T) *simEngine {
	e := &simEngine{}
	e.failNext.Store("")
	mux := http.NewServeMux()
	complete := func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		b, err := io.ReadAll(r.Body)
		if err == nil {
			err = json.Unmarshal(b, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if bytes.Contains(b, []byte("poison")) {
			// An input the engine fails on, wherever it runs.
			http.Error(w, "engine error on this input", http.StatusInternalServerError)
			return
		}
		switch e.failNext.Swap("") {
		case "500":
			http.Error(w, "engine error", http.StatusInternalServerError)
			return
		case "close":
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		e.served.Add(1)
		e.headers.Store(r.Header.Clone())
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"cmpl-1","object":"text_completion","model":%q,"choices":[{"index":0,"text":"ok","finish_reason":"length"}]}`, testModel)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"text\":\"t%d\"}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
	mux.HandleFunc("POST /v1/completions", complete)
	mux.HandleFunc("POST /v1/chat/completions", complete)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "# TYPE vllm:num_requests_waiting gauge")
		fmt.Fprintln(w, `vllm:num_requests_waiting{model_name="m"} 0`)
	})
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

func prompt(seed, blocks int) []uint32 {
	ts := make([]uint32, blocks*testBS)
	for i := range ts {
		ts[i] = uint32(seed*7919 + i)
	}
	return ts
}

func body(t testing.TB, tokens []uint32, stream bool) []byte {
	b, err := json.Marshal(map[string]any{"model": testModel, "prompt": tokens, "max_tokens": 8, "stream": stream})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func startRouter(t *testing.T, o Options) *Router {
	t.Helper()
	o.Model, o.Namespace, o.BlockSize = testModel, testNS, testBS
	if o.ProbeInterval == 0 {
		o.ProbeInterval = 50 * time.Millisecond
	}
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func serve(t *testing.T, r *Router, b []byte) (*httptest.ResponseRecorder, error) {
	t.Helper()
	w := httptest.NewRecorder()
	err := r.Serve(t.Context(), Completions, b, w)
	return w, err
}

// TestRouterFollowsEvents checks that requests go where their prefix is
// cached, by the engines' KV events, and stop going there once the engine
// evicts it.
func TestRouterFollowsEvents(t *testing.T) {
	a, b := newSimEngine(t), newSimEngine(t)
	pub := kveventstest.Start(t)
	r := startRouter(t, Options{Engines: []Engine{
		{ID: "a", URL: a.srv.URL},
		{ID: "b", URL: b.srv.URL, Events: pub.Endpoint, Replay: pub.Replay},
	}})
	stats := r.EventStats("b")
	kveventstest.WaitFor(t, "the subscription", func() bool { return r.engines["b"].sub.Connected() })
	pub.Prime(func() bool { return stats.Batches.Load() > 0 })

	// Engine b caches eight blocks of a prompt; a request for it lands on b
	// although a (first in order) is as idle.
	shared := prompt(1, 8)
	pub.Batch(false, kveventstest.Stored([]int64{1, 2, 3, 4, 5, 6, 7, 8}, nil, shared, testBS))
	pub.Sync()
	keys, _ := block.ChainKeys(testNS, testBS, shared)
	kveventstest.WaitFor(t, "b's blocks in the scheduler", func() bool {
		h := heldBy(r, keys)
		return h["b"] == 8 && h["a"] == 0
	})
	for i := range 3 {
		w, err := serve(t, r, body(t, append(shared[:len(shared):len(shared)], uint32(i)), false))
		if err != nil || w.Code != http.StatusOK {
			t.Fatalf("request %d: %v %d %s", i, err, w.Code, w.Body)
		}
	}
	if a.served.Load() != 0 || b.served.Load() != 3 {
		t.Fatalf("served a=%d b=%d, want all three on b", a.served.Load(), b.served.Load())
	}

	// b evicts the blocks of another cached prompt: its requests no
	// longer go to b.
	other := prompt(2, 4)
	pub.Batch(false, kveventstest.Stored([]int64{11, 12, 13, 14}, nil, other, testBS))
	pub.Sync()
	okeys, _ := block.ChainKeys(testNS, testBS, other)
	kveventstest.WaitFor(t, "b holding the other prompt", func() bool { return heldBy(r, okeys)["b"] == 4 })
	pub.Batch(false, kveventstest.Removed(11, 12, 13, 14))
	pub.Sync()
	kveventstest.WaitFor(t, "the eviction", func() bool { return heldBy(r, okeys)["b"] == 0 })
	before := a.served.Load()
	if w, err := serve(t, r, body(t, other, false)); err != nil || w.Code != http.StatusOK {
		t.Fatalf("after eviction: %v %d", err, w.Code)
	}
	if a.served.Load() != before+1 {
		t.Fatal("after b evicted the prefix, the request still went to b")
	}
}

// heldBy returns each engine's prefix of keys in the router's view now.
func heldBy(r *Router, keys []block.Key) map[string]int {
	return heldAt(r, keys, time.Now().UnixNano())
}

// TestRouterSpeculates checks that a decision counts its prompt as cached
// on its engine at once, so the next request of a burst reuses it, and
// that the entry expires when no event confirms it.
func TestRouterSpeculates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := New(Options{Model: testModel, Namespace: testNS, BlockSize: testBS, SpeculativeTTL: time.Second,
			Engines: []Engine{{ID: "a", URL: "http://127.0.0.1:1"}, {ID: "b", URL: "http://127.0.0.1:2"}}})
		if err != nil {
			t.Fatal(err)
		}
		b := body(t, prompt(3, 64), false)
		first, err := r.Place(t.Context(), Completions, b)
		if err != nil {
			t.Fatal(err)
		}
		second, err := r.Place(t.Context(), Completions, b)
		if err != nil {
			t.Fatal(err)
		}
		if got := second.Decision.PrefixTokens; got != 64*testBS {
			t.Fatalf("the burst's second request reuses %d tokens, want %d", got, 64*testBS)
		}
		if h := heldBy(r, first.Keys); h[first.Decision.Prefill] != 64 {
			t.Fatalf("held %v", h)
		}
		// The second request renews the first's entries, or pulls the
		// prefix to the other engine and counts them there too.
		want := int64(64)
		if second.Decision.Prefill != first.Decision.Prefill {
			want = 128
		}
		if n := r.specCount.Load(); n != want {
			t.Fatalf("%d speculative entries, want %d", n, want)
		}
		if st, _ := r.d.Instance(first.Decision.Prefill); st.Blocks != 64 {
			t.Fatalf("the scheduler's status shows %d blocks on %s, want 64", st.Blocks, first.Decision.Prefill)
		}
		time.Sleep(2 * time.Second)
		if h := heldBy(r, first.Keys); h["a"] != 0 || h["b"] != 0 {
			t.Fatalf("unconfirmed speculative entries outlived their TTL: %v", h)
		}
		r.expire(time.Now().UnixNano())
		if n := r.specCount.Load(); n != 0 {
			t.Fatalf("%d speculative entries after the sweep, want 0", n)
		}
		if st, _ := r.d.Instance(first.Decision.Prefill); st.Blocks != 0 {
			t.Fatalf("the scheduler's status shows %d blocks after the sweep, want 0", st.Blocks)
		}
	})
}

// TestRouterEventsOverruleSpeculation checks that an engine's events win
// over the router's guess: a stored block is confirmed (and outlives the
// TTL), a removed one is gone at once, a cleared cache keeps only the
// guesses.
func TestRouterEventsOverruleSpeculation(t *testing.T) {
	r, err := New(Options{Model: testModel, Namespace: testNS, BlockSize: testBS,
		Engines: []Engine{{ID: "a", URL: "http://127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := block.ChainKeys(testNS, testBS, prompt(9, 8))
	sink := engineSink{r: r, e: r.engines["a"]}
	now := time.Now().UnixNano()
	r.speculate("a", &keySizes{base: testBS, keys: keys, ns: testNS}, now)
	ttl := int64(r.opts.SpeculativeTTL)
	steps := []struct {
		name   string
		u      kvevents.Update
		at     int64
		want   int
		wantSp int64
	}{
		{"speculated", kvevents.Update{}, now, 8, 8},
		{"blocks 0-3 stored", kvevents.Update{Changes: changes(keys[:4], 1)}, now, 8, 4},
		{"confirmed ones outlive the TTL", kvevents.Update{}, now + 2*ttl, 4, 4},
		{"block 2 removed", kvevents.Update{Changes: changes(keys[2:3], 0)}, now, 2, 4},
		{"block 5 removed", kvevents.Update{Changes: changes(keys[5:6], 0)}, now, 2, 3},
		{"cleared", kvevents.Update{Reset: true}, now, 0, 3},
	}
	for _, s := range steps {
		sink.Apply(s.u)
		if got := heldAt(r, keys, s.at)["a"]; got != s.want {
			t.Fatalf("%s: a holds %d blocks of the prompt, want %d", s.name, got, s.want)
		}
		if n := r.specCount.Load(); n != s.wantSp {
			t.Fatalf("%s: %d speculative entries, want %d", s.name, n, s.wantSp)
		}
	}
}

func changes(keys []block.Key, tiers index.TierMask) []kvevents.Change {
	var cs []kvevents.Change
	for _, k := range keys {
		cs = append(cs, kvevents.Change{Key: k, Tiers: tiers})
	}
	return cs
}

func heldAt(r *Router, keys []block.Key, now int64) map[string]int {
	out := map[string]int{}
	for _, h := range r.match(&keySizes{base: testBS, keys: keys, ns: testNS}, now, nil) {
		out[h.Instance] = h.Blocks
	}
	return out
}

func TestRouterRejectsWhenOverloaded(t *testing.T) {
	a := newSimEngine(t)
	o := Options{Engines: []Engine{{ID: "a", URL: a.srv.URL}}, RetryAfter: 3 * time.Second}
	o.Scheduler.TTFTSLO = time.Nanosecond
	r := startRouter(t, o)
	_, err := serve(t, r, body(t, prompt(4, 2), false))
	var ov *Overloaded
	if !errors.As(err, &ov) || !errors.Is(err, ErrOverloaded) || ov.RetryAfter != 3*time.Second {
		t.Fatalf("got %v, want an Overloaded error with Retry-After 3s", err)
	}
	if a.served.Load() != 0 {
		t.Fatal("a rejected request reached the engine")
	}
}

// TestRouterRetriesAfterFailure: an attempt an engine fails is placed
// again; the engine, whose probe answers, stays in, and here (the only
// one) serves the retry.
func TestRouterRetriesAfterFailure(t *testing.T) {
	for _, mode := range []string{"500", "close"} {
		t.Run(mode, func(t *testing.T) {
			a := newSimEngine(t)
			// The ticker's probes stay off: only the failure's probe runs.
			r := startRouter(t, Options{ProbeInterval: time.Hour, Engines: []Engine{{ID: "a", URL: a.srv.URL}}})
			a.failNext.Store(mode)
			w, err := serve(t, r, body(t, prompt(5, 2), true))
			if err != nil || w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "data: [DONE]") {
				t.Fatalf("got %v %d %q, want the retry's answer", err, w.Code, w.Body)
			}
			if got := counter(t, r.m.retries); got != 1 {
				t.Fatalf("%v retries, want 1", got)
			}
			if _, err := r.d.Instance("a"); err != nil {
				t.Fatalf("the engine, whose probe answers, left the scheduler after failing one request: %v", err)
			}
		})
	}
}

// TestRouterPoisonRequestLeavesEnginesUp: a request every engine fails
// (an input it cannot take) fails alone; the engines stay in and the next
// client is served. Before, each attempt took its engine out, and one such
// request a probe interval left every client with 503 no_engine.
func TestRouterPoisonRequestLeavesEnginesUp(t *testing.T) {
	a, b := newSimEngine(t), newSimEngine(t)
	r := startRouter(t, Options{ProbeInterval: time.Hour, Engines: []Engine{{ID: "a", URL: a.srv.URL}, {ID: "b", URL: b.srv.URL}}})
	for i := range 3 {
		_, err := serve(t, r, []byte(`{"model":"m","prompt":"poison pill `+fmt.Sprint(i)+`"}`))
		if !errors.Is(err, ErrUpstream) {
			t.Fatalf("poison request %d: %v, want ErrUpstream", i, err)
		}
		for j := range 2 {
			w, err := serve(t, r, body(t, prompt(40+2*i+j, 2), false))
			if err != nil || w.Code != http.StatusOK {
				t.Fatalf("request %d after poison request %d: %v %d, want 200", j, i, err, w.Code)
			}
		}
	}
	if got := counter(t, r.m.engineDown.WithLabelValues("a")) + counter(t, r.m.engineDown.WithLabelValues("b")); got != 0 {
		t.Fatalf("engines taken out %v times", got)
	}
}

// TestRouterDeadEngineLeavesBeforeRetry: an engine that refuses
// connections fails its probe as well as the request, so it is out before
// the retry is placed, and the client is served by the other.
func TestRouterDeadEngineLeavesBeforeRetry(t *testing.T) {
	a, b := newSimEngine(t), newSimEngine(t)
	r := startRouter(t, Options{ProbeInterval: time.Hour, Engines: []Engine{{ID: "a", URL: a.srv.URL}, {ID: "b", URL: b.srv.URL}}})
	a.srv.Close()
	for i := range 4 {
		w, err := serve(t, r, body(t, prompt(60+i, 2), false))
		if err != nil || w.Code != http.StatusOK {
			t.Fatalf("request %d: %v %d, want 200 from b", i, err, w.Code)
		}
	}
	if _, err := r.d.Instance("a"); !errors.Is(err, scheduler.ErrUnknownInstance) {
		t.Fatalf("the dead engine is still scheduled: %v", err)
	}
	if b.served.Load() != 4 {
		t.Fatalf("b served %d of 4", b.served.Load())
	}
}

func TestRouterProbeBringsEngineBack(t *testing.T) {
	a := newSimEngine(t)
	r := startRouter(t, Options{Engines: []Engine{{ID: "a", URL: a.srv.URL}}})
	r.markDown("a", errors.New("test"))
	kveventstest.WaitFor(t, "the probe to bring a back", func() bool {
		_, err := r.d.Instance("a")
		return err == nil
	})
}

func TestRouterStreamsEvents(t *testing.T) {
	a := newSimEngine(t)
	r := startRouter(t, Options{Engines: []Engine{{ID: "a", URL: a.srv.URL}}})
	w, err := serve(t, r, body(t, prompt(7, 1), true))
	if err != nil {
		t.Fatal(err)
	}
	if ct := w.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var data []string
	sc := bufio.NewScanner(strings.NewReader(w.Body.String()))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	if len(data) != 4 || data[3] != "[DONE]" || !strings.Contains(data[0], `"t0"`) {
		t.Fatalf("events %q", data)
	}
}

// TestRouterPassesHeaders: an engine sees the client's request id and
// trace context; the client's Authorization only where the front end lets
// it through, and the engine API key in place of it when one is set. A
// request without a model is for the served one, as vLLM takes it.
func TestRouterPassesHeaders(t *testing.T) {
	a := newSimEngine(t)
	for _, tc := range []struct {
		key      string
		withAuth bool
		want     string
	}{{"", true, "Bearer client"}, {"", false, ""}, {"engine-key", true, "Bearer engine-key"}} {
		r := startRouter(t, Options{Engines: []Engine{{ID: "a", URL: a.srv.URL}}, EngineAPIKey: tc.key})
		h := http.Header{}
		h.Set("Authorization", "Bearer client")
		h.Set("X-Request-Id", "req-7")
		h.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		h.Set("Cookie", "secret")
		w := httptest.NewRecorder()
		if err := r.Serve(WithClientHeaders(t.Context(), h, tc.withAuth), Completions, []byte(`{"prompt":"hi"}`), w); err != nil || w.Code != 200 {
			t.Fatalf("%+v: %v %d", tc, err, w.Code)
		}
		got := a.headers.Load().(http.Header)
		if got.Get("Authorization") != tc.want || got.Get("X-Request-Id") != "req-7" || got.Get("Traceparent") == "" || got.Get("Cookie") != "" {
			t.Errorf("%+v: engine saw %v", tc, got)
		}
	}
}

func TestRouterRefusesBadRequests(t *testing.T) {
	a := newSimEngine(t)
	r := startRouter(t, Options{Engines: []Engine{{ID: "a", URL: a.srv.URL}}, MaxPromptTokens: 100})
	f := func(b string, want error) {
		t.Helper()
		if _, err := serve(t, r, []byte(b)); !errors.Is(err, want) {
			t.Fatalf("%s: got %v, want %v", b, err, want)
		}
	}
	f(`{"model":"other","prompt":"hi"}`, ErrModelNotFound)
	f(`{"model":"m"}`, ErrBadRequest)
	f(`{"model":"m","prompt":[1,2,-3]}`, ErrBadRequest)
	f(`{"model":"m","prompt":["a","b"]}`, ErrBadRequest)
	f(`{"model":"m","prompt":"hi","max_tokens":0}`, ErrBadRequest)
	f(`{"model":"m","prompt":[`+strings.Repeat("1,", 100)+`1]}`, ErrBadRequest)
	f(`not json`, ErrBadRequest)
	if a.served.Load() != 0 {
		t.Fatal("a bad request reached the engine")
	}
}

// TestRouterDisaggregated checks the prefill-then-decode path: the prefill
// engine runs the prompt for one token, the decode engine the request.
func TestRouterDisaggregated(t *testing.T) {
	type seen struct {
		MaxTokens int  `json:"max_tokens"`
		Stream    bool `json:"stream"`
	}
	var got [2]atomic.Value
	mk := func(i int) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/completions" {
				return // probes: /metrics, and /tokenize (an auto tokenizer's)
			}
			var v seen
			json.NewDecoder(r.Body).Decode(&v)
			got[i].Store(v)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"choices":[{"text":"from %d"}]}`, i)
		}))
		t.Cleanup(s.Close)
		return s
	}
	p, d := mk(0), mk(1)
	r := startRouter(t, Options{Engines: []Engine{{ID: "p", URL: p.URL, Role: RolePrefill}, {ID: "d", URL: d.URL, Role: RoleDecode}}})
	w, err := serve(t, r, body(t, prompt(8, 2), true))
	if err != nil || !strings.Contains(w.Body.String(), "from 1") {
		t.Fatalf("%v %q", err, w.Body)
	}
	pv, _ := got[0].Load().(seen)
	dv, _ := got[1].Load().(seen)
	if pv.MaxTokens != 1 || pv.Stream || dv.MaxTokens != 8 || !dv.Stream {
		t.Fatalf("prefill engine saw %+v, decode engine %+v", pv, dv)
	}
}

// TestRouterConcurrentState runs decisions, event batches and sweeps at
// once (run it with -race) and checks the bookkeeping agrees with the
// tables afterwards: the speculative count is the entries with an expiry,
// each engine's block count its table's size.
func TestRouterConcurrentState(t *testing.T) {
	var cfg []Engine
	for i := range 4 {
		cfg = append(cfg, Engine{ID: fmt.Sprintf("e%d", i), URL: "http://127.0.0.1:1"})
	}
	r, err := New(Options{Model: testModel, Namespace: testNS, BlockSize: testBS, Engines: cfg, SpeculativeTTL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var prepared []Prepared
	for i := range 16 {
		p, err := r.Prepare(Completions, body(t, prompt(100+i, 16), false))
		if err != nil {
			t.Fatal(err)
		}
		prepared = append(prepared, p)
	}
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for i := range 300 {
				p, err := r.Decide(t.Context(), prepared[(g*7+i)%len(prepared)])
				if err != nil {
					t.Error(err)
					return
				}
				r.Done(p)
			}
		})
	}
	for _, e := range r.order {
		wg.Go(func() {
			sink := engineSink{r: r, e: e}
			for i := range 300 {
				keys := prepared[i%len(prepared)].Keys
				sink.Apply(kvevents.Update{Reset: i%97 == 0, Changes: changes(keys[:i%len(keys)], index.TierMask(i%2))})
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			r.expire(time.Now().UnixNano())
			time.Sleep(100 * time.Microsecond)
		}
	})
	wg.Wait()
	var specs int64
	for _, e := range r.order {
		e.mu.Lock()
		n := 0
		e.mu.blocks.Filter(func(h *held) bool {
			if h.spec != 0 {
				n++
			}
			return true
		})
		if n != e.mu.specs || int64(e.mu.blocks.Len()) != e.nblocks.Load() {
			t.Errorf("%s: %d entries with an expiry, counted %d; %d blocks, counted %d", e.ID, n, e.mu.specs, e.mu.blocks.Len(), e.nblocks.Load())
		}
		specs += int64(n)
		e.mu.Unlock()
	}
	if got := r.specCount.Load(); got != specs {
		t.Fatalf("speculative count %d, tables hold %d", got, specs)
	}
}

// TestRouterCallers: a caller's namespace keys its prompts apart from
// every other caller's, and HideHits leaves the decision's headers out.
func TestRouterCallers(t *testing.T) {
	a := newSimEngine(t)
	// A TTL no slow run outlasts: the test reads the speculative entries.
	r := startRouter(t, Options{Engines: []Engine{{ID: "a", URL: a.srv.URL}}, SpeculativeTTL: time.Hour})
	b := body(t, prompt(70, 4), false)
	f := func(c Caller, want string) {
		t.Helper()
		w := httptest.NewRecorder()
		if err := r.Serve(WithCaller(t.Context(), c), Completions, b, w); err != nil || w.Code != http.StatusOK {
			t.Fatalf("%+v: %v %d", c, err, w.Code)
		}
		if got := w.Header().Get(HeaderPrefixTokens); got != want {
			t.Fatalf("%+v: prefix tokens %q, want %q", c, got, want)
		}
		if hidden := w.Header().Get(HeaderEngine) == "" && w.Header().Get(HeaderPredictedTTFT) == ""; hidden != c.HideHits {
			t.Fatalf("%+v: headers %v", c, w.Header())
		}
	}
	beta, gamma := Caller{Namespace: "beta/m"}, Caller{Namespace: "gamma/m"}
	f(beta, "0")
	f(beta, "64") // its own prompt, placed a moment ago
	f(gamma, "0") // the same prompt, another tenant's: no hit of beta's
	f(Caller{}, "0")
	f(Caller{HideHits: true}, "")
	if _, err := r.Place(WithCaller(t.Context(), Caller{Namespace: "no-slash"}), Completions, b); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("an invalid namespace: %v", err)
	}
}

// TestRouterPrepareTurns: past MaxConcurrentPrepares, requests wait for a
// turn to be tokenized, and leave when their context ends.
func TestRouterPrepareTurns(t *testing.T) {
	a := newSimEngine(t)
	r := startRouter(t, Options{Engines: []Engine{{ID: "a", URL: a.srv.URL}}, MaxConcurrentPrepares: 1})
	r.prep <- struct{}{} // the one turn, taken
	ctx, cancel := context.WithCancel(t.Context())
	errs := make(chan error, 3)
	for i := range 3 {
		c := t.Context()
		if i == 0 {
			c = ctx
		}
		go func() {
			_, err := r.Place(c, Completions, body(t, prompt(80+i, 2), false))
			errs <- err
		}()
	}
	kveventstest.WaitFor(t, "three requests waiting", func() bool { return gauge(t, r.m.prepWaiting) == 3 })
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the canceled request: %v", err)
	}
	<-r.prep
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := gauge(t, r.m.prepWaiting); n != 0 {
		t.Fatalf("%v waiting at the end", n)
	}
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestRouterLastEngineDownIsNoEngine: a request whose engine died, with no
// other engine to retry on, is an outage (ErrNoEngine, 503), not an
// engine's answer (ErrUpstream, 502).
func TestRouterLastEngineDownIsNoEngine(t *testing.T) {
	a := newSimEngine(t)
	r := startRouter(t, Options{ProbeInterval: time.Hour, Engines: []Engine{{ID: "a", URL: a.srv.URL}}})
	a.srv.Close()
	_, err := serve(t, r, body(t, prompt(70, 2), false))
	if !errors.Is(err, ErrNoEngine) || errors.Is(err, ErrUpstream) {
		t.Fatalf("err %v, want ErrNoEngine alone", err)
	}
}

// TestRouterRetryGoesElsewhere: a retry is placed on another engine than
// the one that failed it, even when that engine's probe answers and it
// holds the prompt's prefix (its own record of the first attempt).
func TestRouterRetryGoesElsewhere(t *testing.T) {
	a, b := newSimEngine(t), newSimEngine(t)
	r := startRouter(t, Options{ProbeInterval: time.Hour, Engines: []Engine{{ID: "a", URL: a.srv.URL}, {ID: "b", URL: b.srv.URL}}})
	a.failNext.Store("500")
	b.failNext.Store("500")
	if _, err := serve(t, r, body(t, prompt(80, 4), false)); !errors.Is(err, ErrUpstream) {
		t.Fatalf("both engines failed it once: %v, want ErrUpstream", err)
	}
	if a.failNext.Load() != "" || b.failNext.Load() != "" {
		t.Fatalf("the retry went to the engine that failed it: a %q, b %q left to fail", a.failNext.Load(), b.failNext.Load())
	}
}
