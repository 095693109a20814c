package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	f := func(o Options, want string) {
		t.Helper()
		o.EnsureDefaults()
		err := o.Validate()
		switch {
		case want == "" && err != nil:
			t.Errorf("%+v: %v", o, err)
		case want != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want)):
			t.Errorf("%+v: got %v, want an ErrInvalid naming %q", o, err, want)
		}
	}
	f(Options{}, "")
	f(Options{Engines: 16, BlockSize: 1024}, "")
	f(Options{Engines: -1}, "engines -1")
	f(Options{Engines: MaxEngines + 1}, "engines 17")
	f(Options{BlockSize: 15}, "block size")
	// Every problem at once.
	f(Options{Engines: 99, BlockSize: 2048}, "block size")
	f(Options{Engines: 99, BlockSize: 2048}, "engines 99")
}

// banner is what the test reads of Run's banner.
type banner struct {
	router, console, dataDir, curl string
	engines                        []string
}

// TestDemo runs the demo as `yuebing demo --engines 2 --traffic` does,
// with its data in a temporary directory: the banner names the router,
// the console and the engines; the traffic's chats answer; two chats of
// the test's own sharing a prefix are answered through the router, the
// second with a cached prefix; the console's API shows both engines and a
// non-zero hit rate; and once the context ends, Run returns with every
// port closed and the data directory gone.
func TestDemo(t *testing.T) {
	// Run's temporary directory lands here, so a failed run leaves none
	// behind.
	t.Setenv("TMPDIR", t.TempDir())
	goroutines := len(running())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Run(ctx, Options{Engines: 2, Traffic: true}, pw)
		pw.CloseWithError(errors.Join(err, io.EOF))
		done <- err
	}()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the demo ended early: %v", <-done)
			}
			t.Log(l)
			return l
		case <-time.After(60 * time.Second):
			t.Fatal("no output from the demo for 60 s")
		}
		return ""
	}

	var b banner
	for l := next(); l != "Ctrl-C stops everything."; l = next() {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == "router":
			b.router = f[1]
		case len(f) >= 2 && f[0] == "console":
			b.console = f[1]
		case len(f) >= 3 && f[0] == "engine":
			b.engines = append(b.engines, f[2])
		case len(f) >= 2 && f[0] == "data":
			b.dataDir = f[1]
		case len(f) >= 1 && f[0] == "curl":
			b.curl = strings.TrimSpace(l)
		}
	}
	if !strings.HasPrefix(b.router, "http://127.0.0.1:") || !strings.HasSuffix(b.router, "/v1") {
		t.Fatalf("router base URL %q", b.router)
	}
	if !strings.HasPrefix(b.console, "http://127.0.0.1:") || !strings.HasSuffix(b.console, "/ui/") {
		t.Fatalf("console URL %q", b.console)
	}
	if len(b.engines) != 2 {
		t.Fatalf("engines %q, want 2", b.engines)
	}
	if !strings.HasPrefix(b.curl, "curl "+b.router+"/chat/completions ") {
		t.Fatalf("curl %q does not call the router's chat endpoint", b.curl)
	}
	if _, err := os.Stat(b.dataDir); err != nil {
		t.Fatalf("data directory: %v", err)
	}
	base := strings.TrimSuffix(b.router, "/v1")

	// The traffic: five chats, an engine taken out and back, a summary.
	var chats int
	for l := next(); !strings.HasPrefix(l, "node: "); l = next() {
		if strings.HasPrefix(strings.TrimSpace(l), "chat ") {
			chats++
		}
	}
	if chats != len(questions) {
		t.Fatalf("%d chats reported, want %d", chats, len(questions))
	}

	hc := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	// The test's own chats, through the router, sharing a prefix.
	shared := strings.Repeat("The test's shared context, long enough for several blocks. ", 8)
	var prefix []int
	for _, q := range []string{"first question", "second question"} {
		body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "system", "content": shared}, {"role": "user", "content": q}}, "max_tokens": 4})
		resp, err := hc.Post(b.router+"/chat/completions", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || len(out.Choices) != 1 {
			t.Fatalf("chat %q: %s, %v, %+v", q, resp.Status, err, out)
		}
		n, err := strconv.Atoi(resp.Header.Get("X-Yuebing-Prefix-Tokens"))
		if err != nil {
			t.Fatalf("X-Yuebing-Prefix-Tokens %q: %v", resp.Header.Get("X-Yuebing-Prefix-Tokens"), err)
		}
		prefix = append(prefix, n)
	}
	if prefix[1] <= 0 {
		t.Errorf("prefix tokens of the chats sharing a prefix: %v, want the second's above 0", prefix)
	}

	// What the console reads: the router's engines and the node's hits.
	getJSON := func(path string, v any) {
		t.Helper()
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var inst struct {
		Instances []struct {
			ID string `json:"id"`
		} `json:"instances"`
	}
	getJSON("/v1/conductor/instances", &inst)
	if len(inst.Instances) != 2 {
		t.Errorf("the console's conductor page would show %+v, want 2 engines", inst.Instances)
	}
	var st nodeStats
	getJSON("/v1/stats", &st)
	if st.Store.Hits == 0 {
		t.Errorf("the console's overview would show %d hits and %d misses: want a non-zero hit rate", st.Store.Hits, st.Store.Misses)
	}
	resp, err := hc.Get(b.console)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s", b.console, resp.Status)
	}
	hc.CloseIdleConnections()

	// Ctrl-C: everything stops.
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30 s after its context ended")
	}
	for _, u := range append([]string{base}, b.engines...) {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := net.DialTimeout("tcp", pu.Host, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after the demo stopped", u)
		}
	}
	if _, err := os.Stat(b.dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary data directory %s is still there: %v", b.dataDir, err)
	}
	// Nothing left running: the goroutines of this test's readers
	// end with the pipe, and Run's with Run.
	deadline := time.Now().Add(10 * time.Second)
	left := running()
	for ; len(left) > goroutines && time.Now().Before(deadline); left = running() {
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > goroutines {
		t.Errorf("%d goroutines after Run returned, %d before:\n%s", len(left), goroutines, strings.Join(left, "\n\n"))
	}
}

// running returns the stacks of the goroutines running, but for the
// writer of each ZMQ PUB socket ever opened: go-zeromq/zmq4 (v0.17.0)
// starts one per socket and its Close does not stop it.
func running() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "zmq4.(*pubMWriter).run") {
			out = append(out, g)
		}
	}
	return out
}

// TestDemoKeepsDataDir: a data directory given is the node's, and stays.
func TestDemoKeepsDataDir(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Run(ctx, Options{Engines: 1, DataDir: dir}, pw)
		pw.Close()
		done <- err
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() && sc.Text() != "Ctrl-C stops everything." {
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/ssd"); err != nil {
		t.Errorf("the node's data under %s: %v", dir, err)
	}
}
