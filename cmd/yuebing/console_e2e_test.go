package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/yuebing/yuebing/block"
)

// The console's browser tests drive Debian's headless Chromium over the
// DevTools protocol (chromedp) against real `yuebing serve` processes, and
// check that the pages show the nodes' real figures.

// browser is a headless Chromium with one tab.
type browser struct {
	ctx  context.Context
	dir  string // screenshots
	base string // the console's URL
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/chromium"); serr != nil {
			t.Skip("chromium is not installed (apt-get install chromium): the console's browser test needs it")
		}
		path = "/usr/bin/chromium"
	}
	// Chromium's helper processes can still write to the profile for a
	// moment after the browser is gone, so the profile is not a t.TempDir
	// (whose removal would then fail the test): it is removed after the
	// browser, retrying briefly.
	profile, err := os.MkdirTemp("", "yuebing-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1000),
	}
	// Generous: Chromium starts slowly on a loaded machine.
	ctx, cancelTime := context.WithTimeout(t.Context(), 3*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelTime()
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("leaving the browser profile %s: %v", profile, os.RemoveAll(profile))
	})
	b := &browser{ctx: bctx, dir: t.TempDir(), base: base}
	if err := chromedp.Run(bctx, chromedp.EmulateViewport(1280, 1000), chromedp.Navigate(base+"/ui/")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return b
}

// run runs actions, failing the test with the page's text on error.
func (b *browser) run(t *testing.T, what string, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		t.Fatalf("%s: %v\npage: %s", what, err, b.text())
	}
}

func (b *browser) text() string {
	var s string
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	chromedp.Run(ctx, chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &s))
	return s
}

// wait waits until the JavaScript expression js is true. Errors count
// as false: a page that reloads loses its execution context for a moment.
func (b *browser) wait(t *testing.T, what, js string) {
	t.Helper()
	if err := b.poll(js); err != nil {
		t.Fatalf("waiting for %s: %v\npage: %s", what, err, b.text())
	}
}

func (b *browser) poll(js string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		var ok bool
		err := chromedp.Run(b.ctx, chromedp.Evaluate(js, &ok))
		if err == nil && ok {
			return nil
		}
		if b.ctx.Err() != nil {
			return b.ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not true after 60s (last error %v): %s", err, js)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitValue waits until the element with id shows the figure want.
func (b *browser) waitValue(t *testing.T, id, want string) {
	t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.getElementById(%q); return e !== null && e.dataset.value === %q; })()`, id, want)
	if err := b.poll(js); err != nil {
		var got string
		chromedp.Run(b.ctx, chromedp.Evaluate(fmt.Sprintf(`(() => { const e = document.getElementById(%q); return e ? "data-value " + e.dataset.value : "no element"; })()`, id), &got))
		t.Fatalf("#%s: want %s, got %s: %v\npage: %s", id, want, got, err, b.text())
	}
}

// page shows a console page and waits until it has drawn.
func (b *browser) page(t *testing.T, name string) {
	t.Helper()
	b.run(t, "go to "+name, chromedp.Evaluate(fmt.Sprintf(`location.hash = "#/%s"`, name), nil))
	b.wait(t, name+" drawn", fmt.Sprintf(`document.getElementById("page").dataset.loaded === %q`, name))
}

// screenshot saves the page as a PNG in the test's temp dir, and also in
// $YUEBING_SCREENSHOT_DIR when set, named console-NAME (how docs/img is
// refreshed: YUEBING_SCREENSHOT_DIR=$PWD/docs/img).
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	var png []byte
	b.run(t, "screenshot", chromedp.FullScreenshot(&png, 100))
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s is not a PNG", name)
	}
	paths := []string{filepath.Join(b.dir, name)}
	if d := os.Getenv("YUEBING_SCREENSHOT_DIR"); d != "" {
		paths = append(paths, filepath.Join(d, "console-"+name))
	}
	for _, p := range paths {
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s", filepath.Join(b.dir, name))
}

func (b *browser) login(t *testing.T, token string) {
	t.Helper()
	b.wait(t, "the token form", `!document.getElementById("login").hidden`)
	b.run(t, "log in", chromedp.SendKeys("#token", token, chromedp.ByQuery), chromedp.Click(`#login button[type=submit]`, chromedp.ByQuery))
}

// jsonGet reads a JSON endpoint with a token.
func jsonGet(t *testing.T, n *cnode, path, token string, out any) {
	t.Helper()
	hdr := map[string]string{}
	if token != "" {
		hdr["Authorization"] = "Bearer " + token
	}
	code, b, _ := n.do(t, "GET", path, nil, hdr)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

func postJSON(t *testing.T, n *cnode, path, token string, in any, want int) []byte {
	t.Helper()
	body, _ := json.Marshal(in)
	code, b, _ := n.do(t, "POST", path, body, map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"})
	if code != want {
		t.Fatalf("POST %s: %d %s, want %d", path, code, b, want)
	}
	return b
}

// dataState is what the console must never change: the store's writes and
// deletes, its blocks and the contexts.
func dataState(t *testing.T, n *cnode, token string) string {
	t.Helper()
	var st struct {
		Store struct {
			Blocks int64 `json:"blocks"`
			Tiers  []struct {
				Name    string `json:"name"`
				Puts    int64  `json:"puts"`
				Deletes int64  `json:"deletes"`
				Blocks  int64  `json:"blocks"`
			} `json:"tiers"`
		} `json:"store"`
		Contexts int `json:"contexts"`
	}
	jsonGet(t, n, "/v1/stats", token, &st)
	return fmt.Sprintf("%+v", st)
}

func TestConsoleBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("a node and a browser: not in -short")
	}
	const (
		admin  = "console-admin-token-0001"
		tenant = "console-alpha-token-0001"
		ns     = "alpha/llama"
	)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte(admin+": {tenant: ops, role: admin}\n"+tenant+": {tenant: alpha, role: tenant}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Samples for the charts every 200 ms instead of 5 s, so a test sees
	// a few of them.
	cfg := filepath.Join(dir, "yuebing.yaml")
	if err := os.WriteFile(cfg, []byte("console:\n  history_interval: 200ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &cnode{node: serve(t, filepath.Join(dir, "data"), "--auth-tokens-file", tokens, "--config", cfg)}

	// Five blocks' worth of tokens; the node stores the first three.
	toks := make([]uint32, 5*256)
	for i := range toks {
		toks[i] = uint32(1000 + i)
	}
	keys, err := block.ChainKeys(ns, 256, toks)
	if err != nil {
		t.Fatal(err)
	}
	const stored = 3
	tenantHdr := map[string]string{"Authorization": "Bearer " + tenant, "X-Yuebing-Namespace": ns}
	for i, k := range keys[:stored] {
		if code, b, _ := n.do(t, "PUT", "/v1/blocks/"+k.String(), testData(i, 4096), tenantHdr); code != 201 {
			t.Fatalf("put: %d %s", code, b)
		}
		for range 3 {
			if code, _, _ := n.do(t, "GET", "/v1/blocks/"+k.String(), nil, tenantHdr); code != 200 {
				t.Fatalf("get: %d", code)
			}
		}
	}
	var ctxResp struct {
		ID string `json:"id"`
	}
	b := postJSON(t, n, "/v1/contexts", tenant, map[string]any{"namespace": ns, "keys": keys[:2], "ttl_seconds": 600, "name": "system prompt"}, 201)
	if err := json.Unmarshal(b, &ctxResp); err != nil {
		t.Fatal(err)
	}
	// The embedded conductor: two instances and one accepted request.
	postJSON(t, n, "/v1/conductor/instances", admin, map[string]any{"id": "p0", "role": "prefill", "addr": "10.0.0.1:9000"}, 201)
	postJSON(t, n, "/v1/conductor/instances", admin, map[string]any{"id": "d0", "role": "decode", "capacity": 1000000}, 201)
	postJSON(t, n, "/v1/conductor/schedule", admin, map[string]any{"keys": keys[:1]}, 200)
	// Then p0 is 1000 s behind: the next request is rejected for its TTFT.
	code, body, _ := n.do(t, "POST", "/v1/conductor/instances/p0/heartbeat", []byte(`{"queue_seconds":1000}`), map[string]string{"Authorization": "Bearer " + admin})
	if code != 204 {
		t.Fatalf("heartbeat: %d %s", code, body)
	}
	postJSON(t, n, "/v1/conductor/schedule", admin, map[string]any{"keys": keys[:1]}, 429)
	before := dataState(t, n, admin)

	br := newBrowser(t, n.url)
	// No token yet: the console asks for one.
	br.login(t, tenant)
	// A tenant's overview: node figures are every tenant's, so no.
	br.wait(t, "the tenant's overview", `document.getElementById("forbidden") !== null`)
	// Its keys page: its context, and a prefix lookup in its namespace.
	br.page(t, "keys")
	br.wait(t, "the tenant's context", fmt.Sprintf(`document.body.innerText.includes(%q) && document.body.innerText.includes("system prompt")`, ctxResp.ID[:12]))
	var tokText strings.Builder
	for _, x := range toks {
		fmt.Fprintf(&tokText, "%d ", x)
	}
	br.run(t, "prefix lookup",
		chromedp.SetValue("#ns", ns, chromedp.ByQuery),
		chromedp.SetValue("#tokens", tokText.String(), chromedp.ByQuery),
		chromedp.Click(`#lookup button[type=submit]`, chromedp.ByQuery))
	br.waitValue(t, "prefix-len", fmt.Sprint(stored))
	br.run(t, "open the context", chromedp.Evaluate(fmt.Sprintf(`location.hash = "#/keys/%s"`, ctxResp.ID), nil))
	br.wait(t, "the context's pin", `(() => { const e = document.getElementById("context-detail"); return e !== null && e.innerText.includes("dram 2, ssd 0"); })()`)
	br.wait(t, "the context's TTL", `(() => { const v = Number(document.getElementById("context-ttl").dataset.value); return v > 0 && v <= 600; })()`)
	br.screenshot(t, "keys.png")

	// Forget the tenant's token; the admin sees the node.
	br.run(t, "forget the token", chromedp.Click("#logout", chromedp.ByQuery))
	br.login(t, admin)
	br.page(t, "overview")
	br.waitValue(t, "blocks", fmt.Sprint(stored))
	br.waitValue(t, "tier-dram-blocks", fmt.Sprint(stored))
	br.wait(t, "hit rate", `document.getElementById("hit-rate").innerText === "100.0%"`)
	// The charts: the page's own polling is the request rate; reads now
	// are the hit rate, all hits.
	br.wait(t, "a request rate", `Number(document.getElementById("chart-fe-http-rate").dataset.last) > 0`)
	stop := make(chan struct{})
	readsDone := make(chan struct{})
	go func() {
		defer close(readsDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				n.do(t, "GET", "/v1/blocks/"+keys[0].String(), nil, tenantHdr)
			}
		}
	}()
	br.wait(t, "a hit rate", `document.getElementById("chart-hit-rate").dataset.last === "100"`)
	// Misses: reads of the two blocks the node does not hold.
	for _, k := range keys[stored:] {
		if code, _, _ := n.do(t, "GET", "/v1/blocks/"+k.String(), nil, tenantHdr); code != 404 {
			t.Fatalf("get a missing block: %d", code)
		}
	}
	var hm struct {
		Store struct{ Hits, Misses int64 } `json:"store"`
	}
	jsonGet(t, n, "/v1/stats", admin, &hm)
	t.Logf("store: %d hits, %d misses", hm.Store.Hits, hm.Store.Misses)
	// Bars (rect with a title; the legend's have none) of both series.
	br.wait(t, "hits and misses per interval", `(() => { const c = document.getElementById("chart-hits-misses"); return c !== null && Number(c.dataset.points) > 0 && c.querySelectorAll("rect.s0 title").length > 0 && c.querySelectorAll("rect.s1 title").length > 0; })()`)
	br.wait(t, "the HTTP latency", `(() => { const c = document.getElementById("chart-fe-http-latency"); return c !== null && Number(c.dataset.points) > 0 && Number(c.dataset.last) > 0 && document.getElementById("fe-http-latency").innerText.includes("p99"); })()`)
	br.wait(t, "the tier fill", `(() => { const c = document.getElementById("chart-tier-fill"); return c !== null && Number(c.dataset.points) > 0 && Number(c.dataset.last) > 0; })()`)
	close(stop)
	<-readsDone
	br.screenshot(t, "overview.png")
	br.page(t, "cluster")
	br.wait(t, "no cluster", `document.getElementById("no-cluster") !== null`)
	br.page(t, "conductor")
	br.waitValue(t, "accepted", "1")
	br.waitValue(t, "instances", "2")
	br.waitValue(t, "rejected-ttft_slo", "1")
	br.waitValue(t, "rejected-tbt_slo", "0")
	br.wait(t, "instance rows", `document.getElementById("instance-d0") !== null && Number(document.querySelector("#instance-p0 td[data-queue]").dataset.queue) > 900`)
	br.wait(t, "no router", `document.getElementById("router-engines") === null && !document.getElementById("page").innerText.includes("null")`)
	br.screenshot(t, "conductor.png")

	// A phone-width screen: nothing wider than the screen.
	br.run(t, "phone width", chromedp.EmulateViewport(390, 844))
	br.page(t, "overview")
	br.waitValue(t, "blocks", fmt.Sprint(stored))
	var width int
	br.run(t, "page width", chromedp.Evaluate(`document.documentElement.scrollWidth`, &width))
	if width > 390 {
		t.Errorf("on a 390 px screen the overview is %d px wide", width)
	}
	br.screenshot(t, "overview-phone.png")

	if after := dataState(t, n, admin); after != before {
		t.Fatalf("the console changed data:\nbefore %s\nafter  %s", before, after)
	}
}

func TestConsoleBrowserCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("two nodes and a browser: not in -short")
	}
	root := t.TempDir()
	a := serveCluster(t, "a", filepath.Join(root, "a"), "--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0")
	b := serveCluster(t, "b", filepath.Join(root, "b"), "--etcd", a.banner["etcd"])
	waitCluster(t, a, b)
	keys := chainKeys(t, 6, 42)
	for i, k := range keys[:4] {
		a.put(t, k, testData(i, 50_000), 0)
	}
	for i, k := range keys[4:] {
		b.put(t, k, testData(10+i, 50_000), 0)
	}
	waitFor(t, 30*time.Second, "the leader indexes 6 blocks", func() string {
		st, ok := a.status(t)
		if !ok || st.LeaderStatus == nil || st.LeaderStatus.Blocks != 6 {
			return fmt.Sprintf("%+v", st.LeaderStatus)
		}
		return ""
	})
	// Reads make a block hot: the leader tracks a block's heat once its
	// reads reach a floor (a quarter of cluster.hot_hits, 8 by default).
	for i := range 16 {
		n := []*cnode{a, b}[i%2]
		if code, _ := n.get(t, keys[0], testData(0, 50_000)); code != 200 {
			t.Fatalf("GET on %s: %d", n.name, code)
		}
	}
	waitFor(t, 30*time.Second, "a hot block", func() string {
		code, body, _ := a.do(t, "GET", "/v1/cluster/hot", nil, nil)
		if code != 200 || !strings.Contains(string(body), keys[0].String()) {
			return fmt.Sprintf("%d %s", code, body)
		}
		return ""
	})
	st, _ := a.status(t)
	for _, q := range []string{"0", "1001", "x"} {
		if code, body, _ := a.do(t, "GET", "/v1/cluster/hot?limit="+q, nil, nil); code != 400 || !strings.Contains(string(body), "bad_request") {
			t.Errorf("hot blocks with limit %q: %d %s, want 400 bad_request", q, code, body)
		}
	}
	var nodes struct {
		Nodes []struct {
			Name   string `json:"name"`
			Leader bool   `json:"leader"`
			Self   bool   `json:"self"`
			Stats  *struct {
				Node string `json:"node"`
			} `json:"stats"`
		} `json:"nodes"`
	}
	jsonGet(t, b, "/v1/cluster/nodes", "", &nodes)
	if len(nodes.Nodes) != 2 {
		t.Fatalf("cluster nodes from b: %+v", nodes)
	}
	for _, m := range nodes.Nodes {
		if m.Stats == nil || m.Stats.Node != m.Name || m.Self != (m.Name == "b") || m.Leader != (m.Name == st.Leader.Name) {
			t.Errorf("member %+v as b sees it (leader %s)", m, st.Leader.Name)
		}
	}

	br := newBrowser(t, a.url)
	br.page(t, "cluster")
	br.waitValue(t, "members", "2")
	br.waitValue(t, "index-blocks", "6")
	br.wait(t, "the leader", fmt.Sprintf(`document.getElementById("leader").innerText === %q`, st.Leader.Name))
	for name, want := range map[string]int{"a": 4, "b": 2} {
		// b may have kept a copy of the block it read (second-hit admission).
		br.wait(t, "member "+name+"'s blocks", fmt.Sprintf(`(() => { const r = document.getElementById("member-%s"); const c = r && r.querySelector("td[data-blocks]"); return c !== null && Number(c.dataset.blocks) >= %d; })()`, name, want))
	}
	br.wait(t, "links to each member's console", fmt.Sprintf(`document.querySelector('#member-b a').href === "http://%s/ui/"`, strings.TrimPrefix(b.url, "http://")))
	br.screenshot(t, "cluster.png")

	br.page(t, "keys")
	// 16 reads (the sketch may count a few more); a copy on a, in DRAM,
	// and perhaps one on b (second-hit admission keeps one until
	// replication drops the surplus).
	br.wait(t, "the hot block", fmt.Sprintf(`(() => { const r = document.querySelector('tr[data-key="%s"]'); return r !== null && Number(r.dataset.heat) >= 16 && Number(r.dataset.replicas) >= 1 && r.innerText.includes("a (dram)"); })()`, keys[0]))
	br.screenshot(t, "keys-cluster.png")
}

// TestConsoleBrowserRouter runs `yuebing demo --traffic` (a node running
// the router in front of engine simulators) and reads the Conductor
// page's router: its engines, their state, the prompt tokens by where
// their KV came from and its decisions; and the overview's charts of the
// same traffic.
func TestConsoleBrowserRouter(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo and a browser: not in -short")
	}
	tmp := t.TempDir()
	cmd := exec.Command(binary, "demo", "--engines", "2", "--traffic")
	cmd.Env = append(envWithout("YUEBING_"), "TMPDIR="+tmp)
	stderr := newSyncBuffer()
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, stdout)
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	var base string
	timeout := time.After(60 * time.Second)
	for base == "" {
		select {
		case l := <-lines:
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "console" {
				base = strings.TrimSuffix(f[1], "/ui/")
			}
		case err := <-done:
			t.Fatalf("yuebing demo exited (%v) before its banner\n%s", err, stderr)
		case <-timeout:
			t.Fatalf("no console in yuebing demo's banner in 60 s\n%s", stderr)
		}
	}

	br := newBrowser(t, base)
	br.page(t, "conductor")
	br.wait(t, "two engines scheduled", `(() => { const e = document.getElementById("router-engines"); return e !== null && e.dataset.value === "2" && e.innerText === "2 of 2"; })()`)
	for _, id := range []string{"e0", "e1"} {
		br.wait(t, "engine "+id, fmt.Sprintf(`(() => { const r = document.getElementById("engine-%s"); return r !== null && r.dataset.state === "scheduled" && r.innerText.includes("healthy"); })()`, id))
	}
	br.wait(t, "hit tokens", `Number(document.getElementById("router-hit-total").dataset.value) > 0 && document.getElementById("hit-hbm") !== null && document.getElementById("hit-miss") !== null`)
	br.wait(t, "decisions", `Number(document.getElementById("router-decision-accepted").dataset.value) > 0`)
	br.screenshot(t, "conductor-router.png")

	br.page(t, "overview")
	br.wait(t, "a request rate", `Number(document.getElementById("chart-fe-http-rate").dataset.points) > 0`)
	br.wait(t, "hits per interval", `Number(document.getElementById("chart-hits-misses").dataset.points) > 0`)
	br.wait(t, "the tier fill", `Number(document.getElementById("chart-tier-fill").dataset.points) > 0`)
	br.screenshot(t, "overview-router.png")
}
