package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
)

// binary is the yuebing binary the end-to-end tests run, built once.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "yuebing-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "yuebing")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building yuebing: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// node is a running `yuebing serve`.
type node struct {
	resp   string // the RESP address, when it listens
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

type syncBuffer struct {
	mu chan struct{}
	b  bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.String()
}

// serve starts the binary on a free loopback port with a small store in
// dataDir and waits for its banner.
func serve(t *testing.T, dataDir string, args ...string) *node {
	t.Helper()
	base := []string{"serve", "--http-listen", "127.0.0.1:0", "--data-dir", dataDir,
		"--dram-capacity", "64MiB", "--ssd-capacity", "256MiB", "--resp-listen", "", "--transfer-listen", "",
		"--shutdown-timeout", "10s"}
	cmd := exec.Command(binary, append(base, args...)...)
	cmd.Env = envWithout("YUEBING_")
	// The banner lists the listeners first, then the tiers; "auth" ends the
	// part the tests read.
	n, lines := start(t, "yuebing serve", cmd, "auth")
	n.resp = strings.TrimPrefix(lines["resp"], "redis://")
	return n
}

// start runs cmd, a `yuebing serve`, kills it when the test ends (showing
// its stderr if the test failed) and waits for its banner up to the line
// named last: the banner comes back as each line's first field to its
// second.
func start(t *testing.T, name string, cmd *exec.Cmd, last string) (*node, map[string]string) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	n := &node{cmd: cmd, stderr: newSyncBuffer(), done: make(chan struct{})}
	cmd.Stderr = n.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		n.err = cmd.Wait()
		close(n.done)
	}()
	t.Cleanup(func() {
		select {
		case <-n.done:
		default:
			cmd.Process.Kill()
			<-n.done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, n.stderr)
		}
	})
	found := make(chan map[string]string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		lines := map[string]string{}
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 {
				lines[f[0]] = f[1]
			}
			if len(f) > 0 && f[0] == last {
				found <- lines // the test reads it from here on
				break
			}
		}
		io.Copy(io.Discard, out)
	}()
	var lines map[string]string
	select {
	case lines = <-found:
	case <-n.done:
		t.Fatalf("%s exited before its banner: %v\n%s", name, n.err, n.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("no banner from %s\n%s", name, n.stderr)
	}
	n.url = lines["http"]
	return n, lines
}

func envWithout(prefix string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, prefix) {
			env = append(env, kv)
		}
	}
	return env
}

// stop sends sig and waits for the process to exit.
func (n *node) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	n.cmd.Process.Signal(sig)
	select {
	case <-n.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("yuebing serve did not exit on %v\n%s", sig, n.stderr)
	}
	if sig == syscall.SIGTERM && n.err != nil {
		t.Fatalf("yuebing serve exited with %v on SIGTERM\n%s", n.err, n.stderr)
	}
}

func (n *node) client(t *testing.T, token string) *client.Client {
	t.Helper()
	c, err := client.New(n.url, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testData(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func TestServeEndToEnd(t *testing.T) {
	dir := t.TempDir()
	n := serve(t, dir)
	c := n.client(t, "")
	ctx := t.Context()
	const ns = "acme/llama"
	tokens := make([]uint32, 16*5)
	for i := range tokens {
		tokens[i] = uint32(i * 3)
	}
	keys, err := c.Keys(ctx, ns, 16, tokens)
	if err != nil {
		t.Fatal(err)
	}
	local, _ := block.ChainKeys(ns, 16, tokens)
	if len(keys) != 5 || keys[4] != local[4] {
		t.Fatalf("server keys differ from block.ChainKeys")
	}
	blocks := map[block.Key][]byte{}
	for i, k := range keys[:2] {
		blocks[k] = testData(i, 300_000)
		if res, err := c.Put(ctx, ns, k, blocks[k]); err != nil || !res.Created {
			t.Fatalf("Put: %+v, %v", res, err)
		}
	}
	var items []client.Item
	for i, k := range keys[2:4] {
		blocks[k] = testData(10+i, 200_000)
		items = append(items, client.Item{Key: k, Data: blocks[k]})
	}
	if _, err := c.PutBatch(ctx, ns, items); err != nil {
		t.Fatal(err)
	}
	// Range read of one "layer".
	r, err := c.Open(ctx, keys[0], client.GetOptions{Offset: 100_000, Length: 50_000})
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(part, blocks[keys[0]][100_000:150_000]) {
		t.Fatal("range read returned the wrong bytes")
	}
	m, err := c.Exists(ctx, ns, keys)
	if err != nil || m.PrefixLen != 4 || m.PrefixTiers["dram"] != 4 {
		t.Fatalf("Exists = %+v, %v", m, err)
	}
	got := 0
	err = c.GetBatch(ctx, ns, keys, func(f client.Frame, rd io.Reader) error {
		data, _ := io.ReadAll(rd)
		if !f.Missing && !bytes.Equal(data, blocks[f.Key]) {
			return fmt.Errorf("frame of %s has the wrong bytes", f.Key)
		}
		if !f.Missing {
			got++
		}
		return nil
	})
	if err != nil || got != 4 {
		t.Fatalf("GetBatch: %v, %d blocks", err, got)
	}
	cx, err := c.CreateContext(ctx, client.ContextSpec{Namespace: ns, Name: "doc", Keys: keys, TTL: time.Hour})
	if err != nil || cx.Resident["dram"] != 4 || cx.Missing != 1 {
		t.Fatalf("CreateContext: %+v, %v", cx, err)
	}
	// Metrics are served and name the routes.
	resp, err := http.Get(n.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`yuebing_tier_capacity_bytes{tier="dram"} 6.7108864e+07`, `yuebing_tier_used_bytes{tier="ssd"}`,
		`route="/v1/blocks/:key"`, `route="/v1/batch/put"`, `yuebing_contexts 1`} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Graceful shutdown flushes DRAM to SSD; a restart serves the blocks
	// again from SSD, and the context with them.
	n.stop(t, syscall.SIGTERM)
	if !strings.Contains(n.stderr.String(), "flushed DRAM blocks to SSD") {
		t.Errorf("shutdown log lacks the flush:\n%s", n.stderr)
	}
	n = serve(t, dir)
	c = n.client(t, "")
	for k, want := range blocks {
		data, info, err := c.Get(ctx, k, client.GetOptions{Namespace: ns})
		if err != nil || !bytes.Equal(data, want) || info.Tier != "ssd" {
			t.Fatalf("after restart, Get(%s) = %v, tier %q", k, err, info.Tier)
		}
	}
	again, err := c.Context(ctx, cx.ID)
	if err != nil || again.Resident["ssd"]+again.Resident["dram"] != 4 || !again.ExpiresAt.Equal(cx.ExpiresAt) {
		t.Fatalf("context after restart: %+v, %v", again, err)
	}
	if err := c.DeleteContext(ctx, cx.ID); err != nil {
		t.Fatal(err)
	}
	n.stop(t, syscall.SIGTERM)
}

func TestServeAuthIsolation(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	const alpha, beta = "alpha-secret-token-0001", "beta-secret-token-00002"
	os.WriteFile(tokens, []byte(alpha+": {tenant: alpha, role: tenant}\n"+beta+": {tenant: beta, role: tenant}\n"), 0o600)
	n := serve(t, filepath.Join(dir, "data"), "--auth-tokens-file", tokens)
	ctx := t.Context()
	ca, cb, anon := n.client(t, alpha), n.client(t, beta), n.client(t, "")
	tokensA := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	ka, _ := block.ChainKeys("alpha/m", 16, tokensA)
	kb, _ := block.ChainKeys("beta/m", 16, tokensA)
	if ka[0] == kb[0] {
		t.Fatal("two tenants share a key for identical tokens")
	}
	if _, err := ca.Put(ctx, "alpha/m", ka[0], []byte("alpha's kv")); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Put(ctx, "beta/m", kb[0], []byte("beta's kv")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := anon.Get(ctx, ka[0], client.GetOptions{}); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("Get without a token = %v", err)
	}
	if _, _, err := cb.Get(ctx, ka[0], client.GetOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("beta reading alpha's block = %v", err)
	}
	if _, err := cb.Put(ctx, "alpha/m", kb[0], []byte("x")); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("beta writing alpha's namespace = %v", err)
	}
	if data, _, err := cb.Get(ctx, kb[0], client.GetOptions{}); err != nil || string(data) != "beta's kv" {
		t.Fatalf("beta reading its block = %q, %v", data, err)
	}
	if _, err := ca.Stats(ctx); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("tenant reading stats = %v", err)
	}
	if err := anon.Health(ctx); err != nil {
		t.Fatalf("/healthz without a token: %v", err)
	}
	n.stop(t, syscall.SIGTERM)
}

func TestServeKill9(t *testing.T) {
	// Blocks larger than the DRAM tier go straight to SSD, where a put is
	// acknowledged only once durable: after kill -9 every acknowledged
	// block reads back intact (the client verifies its CRC-32C).
	dir := t.TempDir()
	n := serve(t, dir, "--dram-capacity", "1MiB")
	c := n.client(t, "")
	ctx := t.Context()
	count := 12
	if testing.Short() {
		count = 4
	}
	tokens := make([]uint32, 16*count)
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	keys, _ := block.ChainKeys("acme/m", 16, tokens)
	for i, k := range keys {
		if res, err := c.Put(ctx, "acme/m", k, testData(100+i, 2<<20)); err != nil || res.Tier != "ssd" {
			t.Fatalf("Put %d: %+v, %v", i, res, err)
		}
	}
	n.stop(t, syscall.SIGKILL)
	n = serve(t, dir, "--dram-capacity", "1MiB")
	c = n.client(t, "")
	for i, k := range keys {
		data, _, err := c.Get(ctx, k, client.GetOptions{})
		if err != nil || !bytes.Equal(data, testData(100+i, 2<<20)) {
			t.Fatalf("after kill -9, block %d: %v", i, err)
		}
	}
	n.stop(t, syscall.SIGTERM)
}

// run runs the binary to completion.
func run(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(envWithout("YUEBING_"), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestServeRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	f := func(wantCode int, wantErr []string, env []string, args ...string) {
		t.Helper()
		_, stderr, code := run(t, env, args...)
		if code != wantCode {
			t.Errorf("yuebing %v: exit %d, want %d\n%s", args, code, wantCode, stderr)
		}
		for _, w := range wantErr {
			if !strings.Contains(stderr, w) {
				t.Errorf("yuebing %v: stderr lacks %q:\n%s", args, w, stderr)
			}
		}
	}
	f(2, []string{"http.listen", "not a loopback address", "--insecure"}, nil, "serve", "--data-dir", dir, "--http-listen", "0.0.0.0:0")
	f(2, []string{"--dram-capacity"}, nil, "serve", "--data-dir", dir, "--dram-capacity", "lots")
	f(2, []string{"dram.policy", "lru"}, nil, "serve", "--data-dir", dir, "--dram-policy", "mru")
	f(2, []string{"YUEBING_SSD_CAPACITY"}, []string{"YUEBING_SSD_CAPACITY=huge"}, "serve", "--data-dir", dir)
	f(2, []string{"--config"}, nil, "serve", "--config", filepath.Join(dir, "missing.yaml"))
}

func TestConfigCommand(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	os.WriteFile(file, []byte("dram:\n  capacity: 3GiB\nssd:\n  capacity: 10GiB\n  compression: zstd\n"), 0o600)
	tokens := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(tokens, []byte("super-secret-token-123: {tenant: a, role: admin}\n"), 0o600)
	out, stderr, code := run(t, []string{"YUEBING_DRAM_CAPACITY=2GiB", "YUEBING_HTTP_LISTEN=127.0.0.1:9999"},
		"config", "--config", file, "--data-dir", dir, "--ssd-compression", "s2", "--auth-tokens-file", tokens)
	if code != 0 {
		t.Fatalf("yuebing config: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"listen: 127.0.0.1:9999", // env over default
		"capacity: 2GiB",         // env over file
		"capacity: 10GiB",        // file
		"compression: s2",        // flag over file
		"tokens_file: " + tokens,
		"max_block_size: 256MiB",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "super-secret") {
		t.Error("config printed a token")
	}
	// What it prints loads back.
	os.WriteFile(file, []byte(out), 0o600)
	if again, stderr, code := run(t, nil, "config", "--config", file); code != 0 || again != out {
		t.Fatalf("config of its own output: exit %d, differs: %v\n%s", code, again != out, stderr)
	}
}

// TestServeRESP talks to the Redis front end of the real binary with raw
// protocol bytes, restarts the node and reads the value back from SSD.
// dialRESP connects to a RESP listener with a deadline for the whole
// conversation.
func dialRESP(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c)
}

func TestServeRESP(t *testing.T) {
	dir := t.TempDir()
	n := serve(t, dir, "--resp-listen", "127.0.0.1:0")
	if n.resp == "" {
		t.Fatal("the banner does not show the RESP listener")
	}
	exchange := func(addr string, steps [][2]string) {
		t.Helper()
		c, r := dialRESP(t, addr)
		defer c.Close()
		for _, s := range steps {
			if _, err := io.WriteString(c, s[0]); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(s[1]))
			if _, err := io.ReadFull(r, got); err != nil {
				t.Fatalf("reply to %q: %v", s[0], err)
			}
			if string(got) != s[1] {
				t.Fatalf("reply to %q = %q, want %q", s[0], got, s[1])
			}
		}
	}
	value := strings.Repeat("kv", 50_000)
	set := fmt.Sprintf("*3\r\n$3\r\nSET\r\n$9\r\nchunk:kv0\r\n$%d\r\n%s\r\n", len(value), value)
	exchange(n.resp, [][2]string{
		{"*1\r\n$4\r\nPING\r\n", "+PONG\r\n"},
		{set, "+OK\r\n"},
		{"*2\r\n$6\r\nEXISTS\r\n$9\r\nchunk:kv0\r\n", ":1\r\n"},
		{"*2\r\n$3\r\nGET\r\n$9\r\nchunk:kv0\r\n", fmt.Sprintf("$%d\r\n%s\r\n", len(value), value)},
	})
	n.stop(t, syscall.SIGTERM)

	n = serve(t, dir, "--resp-listen", "127.0.0.1:0")
	exchange(n.resp, [][2]string{
		{"*2\r\n$3\r\nGET\r\n$9\r\nchunk:kv0\r\n", fmt.Sprintf("$%d\r\n%s\r\n", len(value), value)},
		{"*2\r\n$3\r\nGET\r\n$7\r\nmissing\r\n", "$-1\r\n"},
	})
	n.stop(t, syscall.SIGTERM)
}
