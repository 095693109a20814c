package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuebing/yuebing/kvevents/kveventstest"
	"github.com/yuebing/yuebing/router"
	"github.com/yuebing/yuebing/server/auth"
)

// simCompletions simulates an engine's completions endpoint (no LLM runs
// here): three streamed chunks, then [DONE].
func simCompletions(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t%d\"}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func newRouterServer(t *testing.T, ttftSLO time.Duration) *httptest.Server {
	t.Helper()
	eng := simCompletions(t)
	cc := DefaultConductorConfig()
	cc.TTFTSLO = ttftSLO
	var errs []string
	cc.resolve(func(field, format string, args ...any) { errs = append(errs, field+": "+fmt.Sprintf(format, args...)) })
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	rc := RouterConfig{Model: "m", Namespace: "acme/m", BlockSize: 16, RetryAfter: 2500 * time.Millisecond,
		Engines: []router.Engine{{ID: "e0", URL: eng.URL}}}
	r, err := router.New(rc.options(cc))
	if err != nil {
		t.Fatal(err)
	}
	go r.Run(t.Context())
	h, err := routerHandler(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestRouterAPI(t *testing.T) {
	s := newRouterServer(t, time.Minute)

	resp := post(t, s.URL+"/v1/completions", `{"model":"m","prompt":"hello there","stream":true}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	if len(events) != 4 || events[3] != "[DONE]" {
		t.Fatalf("events %q", events)
	}

	check := func(what string, resp *http.Response, status int, code, typ string) {
		t.Helper()
		var e struct {
			Error struct{ Code, Type, Message string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != status || e.Error.Code != code || e.Error.Type != typ || e.Error.Message == "" {
			t.Fatalf("%s: status %d, error %+v (%v), want %d %s %s", what, resp.StatusCode, e, err, status, code, typ)
		}
	}
	f := func(body string, status int, code string) {
		t.Helper()
		check(body, post(t, s.URL+"/v1/completions", body), status, code, "invalid_request_error")
	}
	f(`{"model":"other","prompt":"x"}`, http.StatusNotFound, "model_not_found")
	f(`{"model":"m","prompt":[-1]}`, http.StatusBadRequest, "invalid_request")
	f(`[`, http.StatusBadRequest, "invalid_request")
	// Past max prompt bytes (1 MiB), refused before it is tokenized: one
	// word of 7.9 MB cost about 8 CPU-seconds.
	f(`{"model":"m","prompt":"`+strings.Repeat("a", 1<<20+1)+`"}`, http.StatusBadRequest, "invalid_request")
	// vLLM's health path, and OpenAI's answer to a wrong method.
	for path, status := range map[string]int{"/health": http.StatusOK, "/healthz": http.StatusOK} {
		hr, err := http.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		hr.Body.Close()
		if hr.StatusCode != status {
			t.Errorf("GET %s: %d", path, hr.StatusCode)
		}
	}
	gr, err := http.Get(s.URL + "/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	defer gr.Body.Close()
	check("GET /v1/completions", gr, http.StatusMethodNotAllowed, "method_not_allowed", "invalid_request_error")

	mr, err := http.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Body.Close()
	var models struct {
		Data []struct{ ID string }
	}
	if err := json.NewDecoder(mr.Body).Decode(&models); err != nil || len(models.Data) != 1 || models.Data[0].ID != "m" {
		t.Fatalf("models %+v %v", models, err)
	}
}

func TestRouterAPIRejectsWith429(t *testing.T) {
	s := newRouterServer(t, time.Nanosecond)
	resp := post(t, s.URL+"/v1/completions", `{"model":"m","prompt":"hello"}`)
	var e struct {
		Error struct{ Code string }
	}
	json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "3" || e.Error.Code != "overloaded" {
		t.Fatalf("status %d, Retry-After %q, code %q; want 429, 3, overloaded", resp.StatusCode, resp.Header.Get("Retry-After"), e.Error.Code)
	}
}

// restartable is an engine simulator that can stop and start again on its
// address, counting the probes of its /metrics.
type restartable struct {
	addr   string
	srv    *http.Server
	probes atomic.Int64
}

func newRestartable(t *testing.T) *restartable {
	t.Helper()
	e := &restartable{addr: "127.0.0.1:0"}
	e.start(t)
	t.Cleanup(e.stop)
	return e
}

func (e *restartable) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"text":"ok"}]}`)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { e.probes.Add(1) })
	e.srv = &http.Server{Handler: mux}
	go e.srv.Serve(ln)
}

func (e *restartable) stop() { e.srv.Close() }

func (e *restartable) url() string { return "http://" + e.addr }

// startRouterServer serves routerHandler over a running router of engines.
func startRouterServer(t *testing.T, rc RouterConfig, tokens *auth.Tokens) (*httptest.Server, *router.Router) {
	t.Helper()
	cc := DefaultConductorConfig()
	var errs []string
	cc.resolve(func(field, format string, args ...any) { errs = append(errs, field+": "+fmt.Sprintf(format, args...)) })
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	rc.Model, rc.Namespace, rc.BlockSize = "m", "acme/m", 16
	r, err := router.New(rc.options(cc))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	h, err := routerHandler(r, tokens)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s, r
}

// call sends a request with an optional bearer token and returns the
// status and body.
func call(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue reads one sample of the router's /metrics; 0 when absent.
func metricValue(t *testing.T, base, sample string) float64 {
	t.Helper()
	_, text := call(t, http.MethodGet, base+"/metrics", "", "")
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// conductorFixture is a router over two restartable engines, e0 and e1,
// probed every 20 ms.
type conductorFixture struct {
	t      *testing.T
	s      *httptest.Server
	e0, e1 *restartable
	inst   string
}

func newConductorFixture(t *testing.T) *conductorFixture {
	e0, e1 := newRestartable(t), newRestartable(t)
	s, _ := startRouterServer(t, RouterConfig{ProbeInterval: 20 * time.Millisecond,
		Engines: []router.Engine{{ID: "e0", URL: e0.url()}, {ID: "e1", URL: e1.url()}}}, nil)
	return &conductorFixture{t: t, s: s, e0: e0, e1: e1, inst: s.URL + "/v1/conductor/instances"}
}

func (f *conductorFixture) want(method, url, body string, want int) {
	f.t.Helper()
	if st, b := call(f.t, method, url, "", body); st != want {
		f.t.Fatalf("%s %s: %d %s, want %d", method, url, st, b, want)
	}
}

// downs waits until e0 has been taken out n times.
func (f *conductorFixture) downs(what string, n float64) {
	f.t.Helper()
	kveventstest.WaitFor(f.t, what, func() bool {
		return metricValue(f.t, f.s.URL, `yuebing_router_engine_down_total{engine="e0"}`) == n
	})
}

// TestRouterDeregisteredEngineStops: an engine deregistered on the
// conductor API that then stops is taken out by its probe, and answering
// again does not bring it back before it is registered again. Before, the
// probe goroutine panicked ("BUG: router: removing a registered engine")
// and the process exited.
func TestRouterDeregisteredEngineStops(t *testing.T) {
	f := newConductorFixture(t)
	f.want(http.MethodDelete, f.inst+"/e0", "", http.StatusNoContent)
	f.e0.stop()
	f.downs("the stopped engine's probe verdict", 1)
	// Probes run one at a time: the second answered after the restart
	// was sent after the first one's verdict was applied.
	from := f.e0.probes.Load()
	f.e0.start(t)
	kveventstest.WaitFor(t, "probes of the restarted engine", func() bool { return f.e0.probes.Load() >= from+2 })
	f.want(http.MethodGet, f.inst+"/e0", "", http.StatusNotFound)
	f.want(http.MethodPost, f.inst, `{"id":"e0","role":"prefill"}`, http.StatusCreated)
	f.want(http.MethodGet, f.inst+"/e0", "", http.StatusOK)
}

// TestRouterEngineRegisteredWhileDown: an engine registered again while
// its probes fail is accepted, and joins the scheduler when it answers.
// Before, the registration added it behind the router's back and its
// return panicked ("BUG: router: re-adding an engine"), ending the process.
func TestRouterEngineRegisteredWhileDown(t *testing.T) {
	f := newConductorFixture(t)
	f.e0.stop()
	f.downs("the engine down", 1)
	st, b := call(t, http.MethodPost, f.inst, "", `{"id":"e0","role":"prefill"}`)
	from := f.e0.probes.Load()
	f.e0.start(t)
	kveventstest.WaitFor(t, "probes of the restarted engine", func() bool { return f.e0.probes.Load() >= from+2 })
	kveventstest.WaitFor(t, "the engine back", func() bool {
		st, _ := call(t, http.MethodGet, f.inst+"/e0", "", "")
		return st == http.StatusOK
	})
	if st != http.StatusAccepted {
		t.Fatalf("registering the down engine: %d %s, want 202 (scheduled once a probe answers)", st, b)
	}
	f.want(http.MethodPost, f.inst, `{"id":"e0","role":"prefill"}`, http.StatusConflict)
}

// TestRouterRefusesUnknownEngines: the conductor API in front of a router
// registers the router's engines only. Before, an instance POSTed with an
// id the router did not know was scheduled, and requests placed on it
// dereferenced a nil engine (500s).
func TestRouterRefusesUnknownEngines(t *testing.T) {
	f := newConductorFixture(t)
	f.want(http.MethodPost, f.inst, `{"id":"x9","addr":"http://127.0.0.1:1","role":"prefill"}`, http.StatusBadRequest)
	f.want(http.MethodPost, f.inst, `{"id":"e1","addr":"http://127.0.0.1:1","role":"prefill"}`, http.StatusBadRequest)
	f.want(http.MethodDelete, f.inst+"/x9", "", http.StatusNotFound)
	for i := range 8 {
		f.want(http.MethodPost, f.s.URL+"/v1/completions", fmt.Sprintf(`{"model":"m","prompt":"request %d"}`, i), http.StatusOK)
	}
}

const (
	testTenantToken = "tenant-beta-0123456789"
	testAdminToken  = "admin-ops-0123456789"
)

func routerTokens(t *testing.T) (*auth.Tokens, string) {
	t.Helper()
	text := testTenantToken + ": {tenant: beta, role: tenant}\n" +
		"tenant-acme-0123456789: {tenant: acme, role: tenant}\n" +
		"tenant-gamma-0123456789: {tenant: gamma, role: tenant}\n" +
		testAdminToken + ": {tenant: ops, role: admin}\n"
	tokens, err := auth.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return tokens, file
}

// TestRouterAuth: with tokens, the standalone router's OpenAI endpoints
// take any known token, which never reaches an engine, and its conductor
// endpoints an admin's. Before, it had no authentication at all.
func TestRouterAuth(t *testing.T) {
	var seen atomic.Value
	seen.Store("")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("Authorization"))
		fmt.Fprint(w, `{"choices":[{"text":"ok"}]}`)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {})
	eng := httptest.NewServer(mux)
	t.Cleanup(eng.Close)
	tokens, _ := routerTokens(t)
	s, _ := startRouterServer(t, RouterConfig{Engines: []router.Engine{{ID: "e0", URL: eng.URL}}}, tokens)

	f := func(method, path, token, body string, want int) {
		t.Helper()
		if st, b := call(t, method, s.URL+path, token, body); st != want {
			t.Fatalf("%s %s with %q: %d %s, want %d", method, path, token, st, b, want)
		}
	}
	completion := `{"model":"m","prompt":"hello"}`
	f(http.MethodPost, "/v1/completions", "", completion, http.StatusUnauthorized)
	f(http.MethodPost, "/v1/completions", "wrong-token-0123456789", completion, http.StatusUnauthorized)
	f(http.MethodPost, "/v1/completions", testTenantToken, completion, http.StatusOK)
	if got := seen.Load(); got != "" {
		t.Fatalf("the engine saw the client's token: %q", got)
	}
	f(http.MethodGet, "/v1/models", testTenantToken, "", http.StatusOK)
	f(http.MethodGet, "/v1/models", "", "", http.StatusUnauthorized)
	for _, tok := range []string{"", testTenantToken} {
		want := http.StatusUnauthorized
		if tok != "" {
			want = http.StatusForbidden
		}
		f(http.MethodDelete, "/v1/conductor/instances/e0", tok, "", want)
		f(http.MethodPost, "/v1/conductor/instances", tok, `{"id":"e0","role":"prefill"}`, want)
		f(http.MethodGet, "/v1/conductor/instances", tok, "", want)
		f(http.MethodPost, "/v1/conductor/schedule", tok, `{"tokens":[1,2,3]}`, want)
	}
	f(http.MethodGet, "/v1/conductor/instances/e0", testAdminToken, "", http.StatusOK)
	f(http.MethodDelete, "/v1/conductor/instances/e0", testAdminToken, "", http.StatusNoContent)
	f(http.MethodPost, "/v1/conductor/instances", testAdminToken, `{"id":"e0","role":"prefill"}`, http.StatusCreated)
	f(http.MethodGet, "/healthz", "", "", http.StatusOK)
	f(http.MethodGet, "/health", "", "", http.StatusOK)
}

// TestRunRouterRefusesOpenListener: run alone, the router (and the
// conductor) refuse a listener off loopback without tokens unless
// insecure, as a node does. Before, they listened on any address with no
// authentication.
func TestRunRouterRefusesOpenListener(t *testing.T) {
	_, file := routerTokens(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // past validation, it listens and shuts down at once
	rc := RouterConfig{Model: "m", Namespace: "acme/m", Engines: []router.Engine{{ID: "e0", URL: "http://127.0.0.1:1"}}}
	run := map[string]func(listen, tokens string, insecure bool) error{
		"router": func(listen, tokens string, insecure bool) error {
			return RunRouter(ctx, RouterOptions{Listen: listen, Router: rc, Conductor: DefaultConductorConfig(), TokensFile: tokens, Insecure: insecure, Banner: io.Discard})
		},
		"conductor": func(listen, tokens string, insecure bool) error {
			return RunConductor(ctx, ConductorOptions{Listen: listen, Config: DefaultConductorConfig(), TokensFile: tokens, Insecure: insecure, Banner: io.Discard})
		},
	}
	for name, f := range run {
		for _, tc := range []struct {
			listen, tokens string
			insecure, bad  bool
		}{
			{"0.0.0.0:0", "", false, true},
			{":0", "", false, true},
			{"0.0.0.0:0", "", true, false},
			{"0.0.0.0:0", file, false, false},
			{"127.0.0.1:0", "", false, false},
			{"127.0.0.1:0", filepath.Join(t.TempDir(), "missing.yaml"), false, true},
		} {
			err := f(tc.listen, tc.tokens, tc.insecure)
			if got := errors.Is(err, ErrInvalidConfig); got != tc.bad {
				t.Errorf("%s %+v: %v, want invalid %v", name, tc, err, tc.bad)
			}
			if tc.bad && tc.tokens == "" && !strings.Contains(fmt.Sprint(err), "insecure") {
				t.Errorf("%s %+v: %v does not say how to allow it", name, tc, err)
			}
		}
	}
}

// TestRouterKeysPerTenant: a tenant's prompts are keyed under its own
// namespace and the decision's headers answered only where the hits are
// the caller's own. Before, every tenant's prompts were keyed under one
// namespace and X-Yuebing-Prefix-Tokens told anyone whether another tenant
// had just sent a prompt.
func TestRouterKeysPerTenant(t *testing.T) {
	eng := newRestartable(t)
	tokens, _ := routerTokens(t)
	// A TTL no slow run outlasts: the test reads the speculative entries.
	s, _ := startRouterServer(t, RouterConfig{SpeculativeTTL: time.Hour, Engines: []router.Engine{{ID: "e0", URL: eng.url()}}}, tokens)
	prompt := `{"model":"m","prompt":[` + strings.Repeat("7,", 63) + `7]}`
	hits := func(token string) (string, bool) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/completions", strings.NewReader(prompt))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("token %s: status %d", token, resp.StatusCode)
		}
		v := resp.Header.Values(router.HeaderPrefixTokens)
		if len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
	f := func(who, token, want string, shown bool) {
		t.Helper()
		if got, ok := hits(token); got != want || ok != shown {
			t.Fatalf("%s: prefix tokens %q (shown %v), want %q (shown %v)", who, got, ok, want, shown)
		}
	}
	f("beta", testTenantToken, "0", true)
	f("beta again", testTenantToken, "64", true) // its own prompt
	f("gamma", "tenant-gamma-0123456789", "0", true)
	// acme is the engines' namespace's tenant: what it matches there
	// may be anyone's, so it is not told.
	f("acme", "tenant-acme-0123456789", "", false)
	f("admin", testAdminToken, "64", true) // acme's, in the engines' namespace
}

// TestNodeRouter: a node's embedded router keeps one state per engine
// with the conductor API, and keys each tenant's prompts apart. Before, an
// engine an admin registered again while it was down panicked the node
// when it came back ("BUG: router: re-adding an engine"), before DRAM was
// flushed; and X-Yuebing-Prefix-Tokens told any tenant whether another had
// just sent a prompt.
func TestNodeRouter(t *testing.T) {
	e0 := newRestartable(t)
	_, tokensFile := routerTokens(t)
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTP.Listen, cfg.RESP.Listen, cfg.Transfer.Listen, cfg.Shm.Listen = "127.0.0.1:0", "", "", ""
	cfg.DRAM.Capacity, cfg.SSD.Capacity = 16<<20, 16<<20
	cfg.Auth.TokensFile = tokensFile
	cfg.Router = RouterConfig{Model: "m", Namespace: "acme/m", BlockSize: 16, ProbeInterval: 20 * time.Millisecond, SpeculativeTTL: time.Hour,
		Engines: []router.Engine{{ID: "e0", URL: e0.url()}}}
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	base := "http://" + n.Addr("http").String()

	inst := base + "/v1/conductor/instances"
	if st, _ := call(t, http.MethodPost, inst, testTenantToken, `{"id":"e0","role":"prefill"}`); st != http.StatusForbidden {
		t.Fatalf("a tenant registering an engine: %d, want 403", st)
	}
	e0.stop()
	kveventstest.WaitFor(t, "the engine down", func() bool {
		return metricValue(t, base, `yuebing_router_engine_down_total{engine="e0"}`) == 1
	})
	st, b := call(t, http.MethodPost, inst, testAdminToken, `{"id":"e0","role":"prefill"}`)
	from := e0.probes.Load()
	e0.start(t)
	kveventstest.WaitFor(t, "probes of the restarted engine", func() bool { return e0.probes.Load() >= from+2 })
	if st != http.StatusAccepted {
		t.Fatalf("registering the down engine: %d %s, want 202", st, b)
	}
	if st, b := call(t, http.MethodGet, inst+"/e0", testAdminToken, ""); st != http.StatusOK {
		t.Fatalf("the engine back: %d %s", st, b)
	}

	prompt := `{"model":"m","prompt":[` + strings.Repeat("9,", 63) + `9]}`
	prefix := func(token string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/v1/completions", strings.NewReader(prompt))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return resp.Header.Get(router.HeaderPrefixTokens)
	}
	if got := prefix(testTenantToken); got != "0" {
		t.Fatalf("beta's first request: prefix tokens %q", got)
	}
	if got := prefix("tenant-gamma-0123456789"); got != "0" {
		t.Fatalf("gamma sees %q prefix tokens of beta's prompt", got)
	}
	if got := prefix(testTenantToken); got != "64" {
		t.Fatalf("beta's second request: prefix tokens %q, want 64", got)
	}
	// The console's conductor page reads the router's engines and
	// counters with the conductor's figures.
	st, b = call(t, http.MethodGet, base+"/v1/conductor/stats", testAdminToken, "")
	var cs conductorStats
	if err := json.Unmarshal([]byte(b), &cs); err != nil || st != http.StatusOK || cs.Router == nil {
		t.Fatalf("conductor stats: %d %s (%v)", st, b, err)
	}
	r := cs.Router
	if len(r.Engines) != 1 || r.Engines[0].ID != "e0" || !r.Engines[0].Healthy || !r.Engines[0].Registered || !r.Engines[0].Scheduled {
		t.Fatalf("router engines %+v", r.Engines)
	}
	if r.HitTokens["hbm"] != 64 || r.HitTokens["miss"] != 128 || r.Decisions["accepted"] != 3 {
		t.Fatalf("router hit tokens %v, decisions %v: want 64 hbm, 128 miss, 3 accepted", r.HitTokens, r.Decisions)
	}
}
