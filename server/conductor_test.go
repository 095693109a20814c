package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/scheduler"
)

// recordingMigrator keeps the plans the driver hands it.
type recordingMigrator struct {
	mu    sync.Mutex
	plans []string
	got   chan struct{}
}

func (m *recordingMigrator) Migrate(_ context.Context, keys []block.Key, from, to string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plans = append(m.plans, fmt.Sprintf("%s->%s %d %s", from, to, len(keys), keys[0]))
	m.got <- struct{}{}
	return nil
}

type apiClient struct {
	t   *testing.T
	url string
}

// do sends a JSON request and returns the status and the decoded body.
func (c apiClient) do(method, path, body string) (int, map[string]any) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatalf("%s %s: status %d, body %q is not a JSON object", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, m
}

// expect checks the status and, for errors, the error code.
func (c apiClient) expect(method, path, body string, status int, code string) map[string]any {
	c.t.Helper()
	got, m := c.do(method, path, body)
	if got != status {
		c.t.Fatalf("%s %s %s: status %d (%v), want %d", method, path, body, got, m, status)
	}
	if code != "" {
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != code || e["message"] == "" {
			c.t.Fatalf("%s %s: body %v, want error code %q with a message", method, path, m, code)
		}
	}
	return m
}

func tokensJSON(n, seed int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, (i*7+seed)%50000)
	}
	return b.String()
}

func newTestService(t *testing.T, l scheduler.Limits, m scheduler.Migrator) (apiClient, *scheduler.Driver) {
	d, err := scheduler.NewDriver(scheduler.DriverOptions{Migrator: m})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewConductorAPI(d, l)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return apiClient{t, srv.URL}, d
}

func TestConductorAPI(t *testing.T) {
	mig := &recordingMigrator{got: make(chan struct{}, 4)}
	c, _ := newTestService(t, scheduler.Limits{MaxBodyBytes: 64 << 10, MaxTokens: 4096, MaxKeys: 64}, mig)

	c.expect("GET", "/healthz", "", 200, "")
	c.expect("POST", "/v1/conductor/instances", `{"id":"p0","role":"prefill","addr":"10.0.0.1:9000"}`, 201, "")
	c.expect("POST", "/v1/conductor/instances", `{"id":"p1","role":"prefill","addr":"10.0.0.2:9000"}`, 201, "")
	c.expect("POST", "/v1/conductor/instances", `{"id":"d0","role":"decode","capacity":1000000}`, 201, "")
	c.expect("POST", "/v1/conductor/instances", `{"id":"p0","role":"prefill"}`, 409, "conflict")
	c.expect("POST", "/v1/conductor/instances", `{"id":"x","role":"chef"}`, 400, "bad_request")
	c.expect("POST", "/v1/conductor/instances", `{"id":"","role":"decode"}`, 400, "bad_request")

	// p0 reports the blocks of a 1024-token prompt (4 blocks of 256).
	keys, err := block.ChainKeys("acme/llama", 256, toTokens(tokensJSON(1024, 1)))
	if err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = `"` + k.String() + `"`
	}
	m := c.expect("POST", "/v1/conductor/instances/p0/blocks", `{"added":[`+strings.Join(quoted, ",")+`]}`, 200, "")
	if m["blocks"] != 4.0 {
		t.Fatalf("blocks response %v, want 4 blocks", m)
	}
	c.expect("POST", "/v1/conductor/instances/d0/blocks", `{"added":[`+quoted[0]+`]}`, 400, "bad_request")
	c.expect("POST", "/v1/conductor/instances/ghost/blocks", `{"added":[]}`, 404, "not_found")
	c.expect("POST", "/v1/conductor/instances/p0/blocks", `{"added":["zz"]}`, 400, "bad_request")

	// Query by tokens (a longer prompt with the same start) and by keys.
	m = c.expect("POST", "/v1/conductor/query", `{"namespace":"acme/llama","tokens":[`+tokensJSON(1500, 1)+`]}`, 200, "")
	insts := m["instances"].([]any)
	if len(insts) != 2 || insts[0].(map[string]any)["blocks"] != 4.0 || insts[1].(map[string]any)["blocks"] != 0.0 {
		t.Fatalf("query: %v, want p0 with 4 blocks and p1 with none", m)
	}
	m = c.expect("POST", "/v1/conductor/query", `{"keys":[`+quoted[0]+`,"`+strings.Repeat("0", 64)+`"]}`, 200, "")
	if got := m["instances"].([]any)[0].(map[string]any)["blocks"]; got != 1.0 {
		t.Fatalf("query by keys: p0 holds %v blocks, want 1", got)
	}

	// With p0 busy, p1 pulls the prefix from p0, and the driver hands the
	// plan to the migrator.
	c.expect("POST", "/v1/conductor/instances/p0/heartbeat", `{"queue_seconds":10}`, 204, "")
	m = c.expect("POST", "/v1/conductor/schedule", `{"request_id":"q1","namespace":"acme/llama","tokens":[`+tokensJSON(1500, 1)+`],"output_tokens":100}`, 200, "")
	if m["request_id"] != "q1" || m["prefill"].(map[string]any)["id"] != "p1" || m["prefill"].(map[string]any)["addr"] != "10.0.0.2:9000" || m["decode"].(map[string]any)["id"] != "d0" {
		t.Fatalf("schedule: %v, want q1 on p1 (10.0.0.2:9000) and d0", m)
	}
	pull, _ := m["pull"].(map[string]any)
	if pull == nil || pull["from"].(map[string]any)["id"] != "p0" || pull["to"] != "p1" || len(pull["keys"].([]any)) != 4 || pull["tokens"] != 1024.0 || m["prefix_tokens"] != 1024.0 {
		t.Fatalf("schedule: %v, want a pull of 4 blocks (1024 tokens) from p0", m)
	}
	if pull["keys"].([]any)[0] != keys[0].String() {
		t.Fatalf("pull keys start %v, want %s", pull["keys"].([]any)[0], keys[0])
	}
	select {
	case <-mig.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the migrator never got the plan")
	}
	if want := "p0->p1 4 " + keys[0].String(); mig.plans[0] != want {
		t.Fatalf("migration %q, want %q", mig.plans[0], want)
	}
	c.expect("POST", "/v1/conductor/schedule", `{"request_id":"q1","keys":[`+quoted[0]+`]}`, 409, "conflict")

	// Overload: both prefill instances are 40 s behind: 429 with the
	// reason and the estimates.
	c.expect("POST", "/v1/conductor/instances/p0/heartbeat", `{"queue_seconds":40}`, 204, "")
	c.expect("POST", "/v1/conductor/instances/p1/heartbeat", `{"queue_seconds":40}`, 204, "")
	m = c.expect("POST", "/v1/conductor/schedule", `{"keys":[`+quoted[0]+`]}`, 429, "overloaded")
	e := m["error"].(map[string]any)
	if e["reason"] != "ttft_slo" || e["estimates"].(map[string]any)["ttft_s"].(float64) < 39 {
		t.Fatalf("429 body %v, want reason ttft_slo and a TTFT estimate near 40 s", m)
	}
	// One accepted and one rejected for the TTFT SLO so far; the failed
	// 409 above is no decision.
	m = c.expect("GET", "/v1/conductor/stats", "", 200, "")
	dec := m["decisions"].(map[string]any)
	rej := dec["rejected"].(map[string]any)
	if dec["accepted"] != 1.0 || rej["ttft_slo"] != 1.0 || rej["tbt_slo"] != 0.0 {
		t.Fatalf("stats %v, want 1 accepted and 1 rejected for ttft_slo", m)
	}
	if inst := m["instances"].(map[string]any); inst["prefill"] != 2.0 || inst["decode"] != 1.0 {
		t.Fatalf("stats %v, want 2 prefill and 1 decode instances", m)
	}
	if mig := m["migrations"].(map[string]any); mig["queued"] != 1.0 {
		t.Fatalf("stats %v, want 1 migration queued", m)
	}

	// Request events.
	c.expect("POST", "/v1/conductor/requests/q1/prefilled", "", 204, "")
	c.expect("POST", "/v1/conductor/requests/q1/finished", "", 204, "")
	c.expect("POST", "/v1/conductor/requests/q1/finished", "", 404, "not_found")

	// Bad requests, each with a clear 400 (or 413).
	for _, body := range []string{
		``,
		`{`,
		`{"namespace":"acme/llama"}`,
		`{"namespace":"nope","tokens":[1]}`,
		`{"namespace":"acme/llama","tokens":[1],"keys":[` + quoted[0] + `]}`,
		`{"namespace":"acme/llama","block_size":512,"tokens":[1]}`,
		`{"namespace":"acme/llama","tokens":[-1]}`,
		`{"namespace":"acme/llama","tokens":[` + tokensJSON(5000, 1) + `]}`,
		`{"keys":[` + quoted[0] + `],"input_tokens":-3}`,
		`{"keys":["` + strings.Repeat("A", 64) + `"]}`,
		`{"keys":[` + quoted[0] + `],"namespace":"acme/llama"}`,
		`{"keys":[` + quoted[0] + `],"output_tokens":-1}`,
		`{"keys":[` + quoted[0] + `]} {}`,
		`{"keys":[` + quoted[0] + `],"typo":1}`,
	} {
		c.expect("POST", "/v1/conductor/schedule", body, 400, "bad_request")
	}
	c.expect("POST", "/v1/conductor/schedule", `{"namespace":"acme/llama","tokens":[`+tokensJSON(20000, 1)+`]}`, 413, "too_large")
	c.expect("POST", "/v1/conductor/instances/p0/heartbeat", `{"queue_seconds":-1}`, 400, "bad_request")
	c.expect("POST", "/v1/conductor/instances/ghost/heartbeat", `{}`, 404, "not_found")
	c.expect("GET", "/v1/nothing", "", 404, "not_found")

	// Listing, and unregistering.
	m = c.expect("GET", "/v1/conductor/instances", "", 200, "")
	if n := len(m["instances"].([]any)); n != 3 {
		t.Fatalf("%d instances listed, want 3: %v", n, m)
	}
	c.expect("DELETE", "/v1/conductor/instances/p1", "", 204, "")
	c.expect("GET", "/v1/conductor/instances/p1", "", 404, "not_found")
	m = c.expect("GET", "/v1/conductor/instances/p0", "", 200, "")
	if m["role"] != "prefill" || m["blocks"] != 4.0 || m["load"].(float64) < 1 {
		t.Fatalf("p0 status %v, want a prefill instance with 4 blocks over its SLO", m)
	}
	c.expect("DELETE", "/v1/conductor/instances/p0", "", 204, "")
	c.expect("POST", "/v1/conductor/schedule", `{"keys":[`+quoted[0]+`]}`, 503, "no_instances")
}

func toTokens(list string) []uint32 {
	var out []uint32
	for _, f := range strings.Split(list, ",") {
		var v uint32
		fmt.Sscan(f, &v)
		out = append(out, v)
	}
	return out
}

// TestConductorMountable mounts the API under another router, as the main
// server does, next to that server's own routes.
func TestConductorMountable(t *testing.T) {
	d, err := scheduler.NewDriver(scheduler.DriverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewConductorAPI(d, scheduler.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	r := gin.New()
	v1 := r.Group("/v1")
	v1.GET("/other", func(c *gin.Context) { c.String(200, "other") })
	svc.Register(v1)
	srv := httptest.NewServer(r)
	defer srv.Close()
	c := apiClient{t, srv.URL}
	c.expect("POST", "/v1/conductor/instances", `{"id":"p0","role":"prefill"}`, 201, "")
	m := c.expect("GET", "/v1/conductor/instances", "", 200, "")
	if len(m["instances"].([]any)) != 1 {
		t.Fatalf("instances %v", m)
	}
}

// TestConductorServeShutdown runs Serve on a real listener and cancels it: Serve
// returns nil, and the port stops answering.
func TestConductorServeShutdown(t *testing.T) {
	d, err := scheduler.NewDriver(scheduler.DriverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewConductorAPI(d, scheduler.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	resp, err := http.Post(url+"/v1/conductor/instances", "application/json", bytes.NewReader([]byte(`{"id":"p0","role":"prefill"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	client := http.Client{Timeout: 2 * time.Second}
	if _, err := client.Get(url + "/healthz"); err == nil {
		t.Fatal("server still answers after shutdown")
	}
}

// TestConductorAuth: run alone with tokens, every conductor endpoint takes
// an admin token, as a node's embedded conductor does.
func TestConductorAuth(t *testing.T) {
	d, err := scheduler.NewDriver(scheduler.DriverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewConductorAPI(d, scheduler.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	svc.tokens, _ = routerTokens(t)
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		token string
		want  int
	}{{"", 401}, {testTenantToken, 403}, {testAdminToken, 201}} {
		if st, b := call(t, "POST", srv.URL+"/v1/conductor/instances", tc.token, `{"id":"p0","role":"prefill"}`); st != tc.want {
			t.Errorf("token %q: %d %s, want %d", tc.token, st, b, tc.want)
		}
	}
	if st, _ := call(t, "GET", srv.URL+"/healthz", "", ""); st != 200 {
		t.Errorf("/healthz: %d", st)
	}
}
