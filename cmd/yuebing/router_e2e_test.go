package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/kvevents"
)

// simEngine simulates an inference engine's faces for the router's
// end-to-end test (no LLM runs here): an OpenAI completions endpoint that
// streams three chunks, vLLM's queue gauge, and a vLLM-format KV event
// stream the test drives.
type simEngine struct {
	id     string
	srv    *httptest.Server
	pub    *kvevents.Publisher
	served atomic.Int64
	// cut makes the next streamed answer stop after its headers, as an
	// engine killed mid-request does.
	cut atomic.Bool
}

func newSimEngine(t *testing.T, id string) *simEngine {
	t.Helper()
	pub, err := kvevents.NewPublisher(kvevents.PublisherOptions{Endpoint: "tcp://127.0.0.1:0", Replay: "tcp://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	e := &simEngine{id: id, pub: pub}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if e.cut.Swap(false) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		e.served.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"%s-%d\"}]}\n\n", id, i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "vllm:num_requests_waiting 0")
	})
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

// store publishes a BlockStored of a whole prompt, hashed as the engine's
// own (here: our keys' bytes, which the router must not rely on).
func (e *simEngine) store(t *testing.T, tokens []uint32) []kvevents.Hash {
	t.Helper()
	keys, err := block.ChainKeys(clusterNS, 16, tokens)
	if err != nil {
		t.Fatal(err)
	}
	hs := make([]kvevents.Hash, len(keys))
	for i, k := range keys {
		hs[i] = kvevents.HashBytes(append([]byte(e.id), k[:8]...))
	}
	if err := e.pub.Publish([]kvevents.Event{{Kind: kvevents.BlockStored, Hashes: hs, Tokens: tokens, BlockSize: 16, Medium: "GPU"}}); err != nil {
		t.Fatal(err)
	}
	return hs
}

func (e *simEngine) flag() string {
	return fmt.Sprintf("id=%s,url=%s,events=%s,replay=%s", e.id, e.srv.URL, e.pub.Endpoint(), e.pub.ReplayEndpoint())
}

// startRouter runs `yuebing conductor` with engines and returns its URL.
func startRouter(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"conductor", "--listen", "127.0.0.1:0", "--model", "llama",
		"--namespace", clusterNS, "--probe-interval", "100ms", "--block-size", "16"}, args...)...)
	cmd.Env = envWithout("YUEBING_")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the router's address: %v", err)
	}
	go io.Copy(io.Discard, stderr)
	url := strings.TrimSpace(strings.TrimPrefix(line, "conductor listening on "))
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line %q names no address", line)
	}
	return url
}

// metric reads one sample of the router's /metrics.
func metric(t *testing.T, url, sample string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}

func promptTokens(seed uint32, blocks int) []uint32 {
	ts := make([]uint32, 16*blocks)
	for i := range ts {
		ts[i] = seed*7919 + uint32(i)
	}
	return ts
}

// complete streams a completion through the router and returns the
// engine that answered.
func complete(t *testing.T, url string, tokens []uint32) (int, string, http.Header) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "llama", "prompt": tokens, "max_tokens": 4, "stream": true})
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(body), resp.Header
	}
	if !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("stream cut: %q", body)
	}
	_, rest, _ := strings.Cut(string(body), `"text":"`)
	engine, _, _ := strings.Cut(rest, "-")
	return resp.StatusCode, engine, resp.Header
}

// TestRouterEndToEnd runs the router and two cluster nodes as real
// processes in front of simulated engines: requests go where their prefix
// is cached by the engines' KV events, stop going there after the engine
// evicts it, a pool prefix is pulled to the chosen engine's node for real,
// an engine that dies mid-request is retried elsewhere, and an overloaded
// router answers 429.
func TestRouterEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs cluster processes")
	}
	root := t.TempDir()
	a := serveCluster(t, "a", filepath.Join(root, "a"), "--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0")
	b := serveCluster(t, "b", filepath.Join(root, "b"), "--etcd", a.banner["etcd"])
	waitCluster(t, a, b)

	e0, e1 := newSimEngine(t, "e0"), newSimEngine(t, "e1")
	url := startRouter(t, "--engine", e0.flag()+",node="+b.url, "--engine", e1.flag()+",node="+a.url,
		"--pool", a.url, "--speculative-ttl", "200ms")

	// e1 caches a prompt: requests sharing it go to e1 (e0 is first in
	// order and as idle, so only the cache can send them there).
	shared := promptTokens(1, 8)
	var hs []kvevents.Hash
	waitFor(t, 30*time.Second, "e1's events to reach the router", func() string {
		hs = e1.store(t, shared)
		if n := metric(t, url, `yuebing_router_events_total{engine="e1",kind="stored"}`); n < 1 {
			return fmt.Sprintf("%v stored events", n)
		}
		return ""
	})
	for i := range 3 {
		if st, eng, _ := complete(t, url, append(slices.Clone(shared), uint32(i))); st != 200 || eng != "e1" {
			t.Fatalf("request %d sharing e1's prefix: %d from %q", i, st, eng)
		}
	}
	// e1 evicts the prefix: the router stops preferring it once the
	// speculative entries of the requests above expire.
	if err := e1.pub.Publish([]kvevents.Event{{Kind: kvevents.BlockRemoved, Hashes: hs, Medium: "GPU"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the router to stop preferring e1", func() string {
		if st, eng, _ := complete(t, url, shared); st != 200 || eng != "e0" {
			return fmt.Sprintf("answered %d by %q", st, eng)
		}
		return ""
	})

	// A prefix held only in the pool, on node a: the request is placed on
	// e0 with a pull plan, and the router moves the blocks to e0's node,
	// b, through the cluster. The two engines are equal choices for it, and
	// equal choices take turns: a fresh prompt that lands on e1 first makes
	// it e0's turn.
	for i := uint32(0); ; i++ {
		st, eng, _ := complete(t, url, promptTokens(50+i, 2))
		if st == 200 && eng == "e1" {
			break
		}
		if i == 10 {
			t.Fatalf("ten fresh prompts and none on e1 (last: %d from %q)", st, eng)
		}
	}
	pooled := promptTokens(2, 6)
	keys, _ := block.ChainKeys(clusterNS, 16, pooled)
	for i, k := range keys {
		a.put(t, k, testData(300+i, 64<<10), 0)
	}
	waitFor(t, 10*time.Second, "the pool blocks indexed", func() string {
		if hs, _ := b.holders(t, keys[5]); !slices.Equal(hs, []string{"a"}) {
			return fmt.Sprintf("holders %v", hs)
		}
		return ""
	})
	time.Sleep(300 * time.Millisecond) // probes clear the engines' queue estimates
	if st, eng, _ := complete(t, url, pooled); st != 200 || eng != "e0" {
		t.Fatalf("pooled prompt: %d from %q", st, eng)
	}
	waitFor(t, 20*time.Second, "the pulled prefix on b", func() string {
		if hs, _ := a.holders(t, keys[5]); !slices.Equal(hs, []string{"a", "b"}) {
			return fmt.Sprintf("holders of the last block %v", hs)
		}
		return ""
	})
	for i, k := range keys {
		if st, src := b.get(t, k, testData(300+i, 64<<10)); st != 200 || src != "b" {
			t.Fatalf("block %d on b: %d from %q, want a local copy", i, st, src)
		}
	}

	// e0 dies before its first chunk: the request is answered by e1.
	e0.cut.Store(true)
	if st, eng, _ := complete(t, url, promptTokens(3, 2)); st != 200 || eng != "e1" {
		t.Fatalf("after e0 failed: %d from %q", st, eng)
	}

	// A router whose TTFT SLO nothing meets rejects early.
	strict := startRouter(t, "--engine", e0.flag(), "--ttft-slo", "1us", "--retry-after", "2s")
	st, body, hdr := complete(t, strict, promptTokens(4, 2))
	if st != http.StatusTooManyRequests || hdr.Get("Retry-After") != "2" || !strings.Contains(body, `"code":"overloaded"`) {
		t.Fatalf("overloaded router: %d, Retry-After %q, %s", st, hdr.Get("Retry-After"), body)
	}
}

// simProc is a `yuebing engine-sim` process publishing KV events.
type simProc struct {
	*node
	name, flag string
}

func startEngineSim(t *testing.T, name string, args ...string) *simProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"engine-sim", "--name", name, "--listen", "127.0.0.1:0",
		"--kv-events", "tcp://127.0.0.1:0", "--kv-replay", "tcp://127.0.0.1:0", "--block-tokens", "16",
		"--namespace", clusterNS, "--pool-blocks", "64", "--time-scale", "0.01"}, args...)...)
	cmd.Env = envWithout("YUEBING_")
	nd, b := start(t, "engine-sim "+name, cmd, "ready")
	nd.url = b["http"]
	return &simProc{node: nd, name: name,
		flag: fmt.Sprintf("id=%s,url=%s,events=%s,replay=%s", name, b["http"], b["kv-events"], b["kv-replay"])}
}

// direct runs a completion on an engine itself, bypassing the router.
func (s *simProc) direct(t *testing.T, tokens []uint32) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "sim-70b", "prompt": tokens, "max_tokens": 1})
	resp, err := http.Post(s.url+"/v1/completions", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("direct completion on %s: %d", s.name, resp.StatusCode)
	}
}

// routed runs a completion through the router and returns the status and
// the engine that answered.
func routed(t *testing.T, url string, tokens []uint32, maxTokens int) (int, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "sim-70b", "prompt": tokens, "max_tokens": maxTokens})
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Logf("router answered %d: %s", resp.StatusCode, raw)
	}
	// The simulator's cache report names the engine that answered.
	var c struct {
		Yuebing struct {
			Engine string `json:"engine"`
		} `json:"yuebing"`
	}
	json.Unmarshal(raw, &c)
	return resp.StatusCode, c.Yuebing.Engine
}

// TestRouterEngineSims runs the router in front of four engine-sim
// processes that publish vLLM KV events: a prefix cached on an engine
// draws its requests, the engine's eviction (BlockRemoved) ends that, and
// an engine killed while answering has the request retried elsewhere.
func TestRouterEngineSims(t *testing.T) {
	if testing.Short() {
		t.Skip("runs engine processes")
	}
	var sims []*simProc
	args := []string{"--listen", "127.0.0.1:0", "--model", "sim-70b", "--namespace", clusterNS,
		"--probe-interval", "100ms", "--speculative-ttl", "100ms"}
	for i := range 4 {
		s := startEngineSim(t, fmt.Sprintf("e%d", i), "--decode-step", "100ms", "--time-scale", "1")
		sims = append(sims, s)
		args = append(args, "--engine", s.flag)
	}
	url := startRouter(t, args[2:]...)

	// e2 caches a prompt (run on it directly): requests sharing the prefix
	// go to e2, although e0 comes first among equals.
	// The router may subscribe after the first batch is published, and a
	// cached prompt publishes nothing when run again: each retry runs a
	// fresh one-block prompt too, whose batch makes the router replay what
	// it missed.
	shared := promptTokens(5, 8)
	sims[2].direct(t, shared)
	probes := 0
	waitFor(t, 30*time.Second, "e2's events to reach the router", func() string {
		// One event for the shared prompt, one for each probe.
		if n := metric(t, url, `yuebing_router_events_total{engine="e2",kind="stored"}`); n < float64(1+probes) {
			sims[2].direct(t, promptTokens(uint32(200+probes), 1))
			probes++
			return fmt.Sprintf("%v stored events after %d probes", n, probes)
		}
		return ""
	})
	for i := range 3 {
		time.Sleep(150 * time.Millisecond) // past the speculative TTL: only events count
		if st, eng := routed(t, url, append(slices.Clone(shared), uint32(i)), 1); st != 200 || eng != "e2" {
			t.Fatalf("request %d sharing e2's prefix: %d from %q", i, st, eng)
		}
	}
	// e2 evicts it: 64 blocks of other prompts fill its cache.
	for i := range 8 {
		sims[2].direct(t, promptTokens(uint32(100+i), 8))
	}
	waitFor(t, 30*time.Second, "the router to stop preferring e2", func() string {
		time.Sleep(150 * time.Millisecond)
		if st, eng := routed(t, url, shared, 1); st != 200 || eng == "e2" {
			return fmt.Sprintf("answered %d by %q", st, eng)
		}
		return ""
	})
	if n := metric(t, url, `yuebing_router_events_total{engine="e2",kind="removed"}`); n < 1 {
		t.Fatalf("%v removed events from e2", n)
	}
	// The simulator sends no kind a newer vLLM added, and only blocks the
	// router can key (orphans depend on when the router joined: exported).
	if n := metric(t, url, `yuebing_router_events_total{engine="e2",kind="unknown"}`); n != 0 {
		t.Errorf("%v unknown events from e2", n)
	}
	if n := metric(t, url, `yuebing_router_events_unkeyed_total{engine="e2",why="unkeyable"}`); n != 0 {
		t.Errorf("%v unkeyable blocks from e2", n)
	}
	if n := metric(t, url, `yuebing_router_events_unkeyed_total{engine="e2",why="orphan"}`); n < 0 {
		t.Error("no orphan counter for e2")
	}

	// e0 is killed while generating: the request is placed again.
	done := make(chan [2]any, 1)
	go func() {
		st, eng := routed(t, url, promptTokens(9, 2), 30) // 30 steps of 100 ms
		done <- [2]any{st, eng}
	}()
	time.Sleep(500 * time.Millisecond)
	sims[0].cmd.Process.Kill()
	select {
	case r := <-done:
		if r[0] != 200 || r[1] == "e0" || r[1] == "" {
			t.Fatalf("after e0 was killed: %v from %q", r[0], r[1])
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the request outlived the retry")
	}
	if n := metric(t, url, "yuebing_router_retries_total"); n < 1 {
		t.Fatalf("%v retries", n)
	}
}
