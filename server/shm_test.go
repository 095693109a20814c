package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/server/auth"
)

// shmSession opens a staging session as a same-host client does and maps
// its segment.
func shmSession(t *testing.T, n *testNode, token string, size int) (string, []byte) {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: n.api.opts.Staging.Addr(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "{\"token\":%q,\"size\":%d}\n", token, size)
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	nb, noob, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	var a struct{ Session string }
	if err := json.Unmarshal(buf[:nb], &a); err != nil || a.Session == "" {
		t.Fatalf("answer %q: %v", buf[:nb], err)
	}
	msgs, _ := unix.ParseSocketControlMessage(oob[:noob])
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fds[0], 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return a.Session, mem
}

func shmCall(t *testing.T, n *testNode, token, path string, req any) (int, shmResponse, string) {
	t.Helper()
	body, _ := json.Marshal(req)
	r := do(t, n, http.MethodPost, path, token, map[string]string{"Content-Type": "application/json"}, body)
	var res shmResponse
	if r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatal(err)
		}
	}
	return r.status, res, string(r.body)
}

func TestShmPutGet(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true, staging: true})
	sess, mem := shmSession(t, n, tokAlpha, 1<<20)
	a, b := payload(1, 300<<10), payload(2, 5000)
	copy(mem, a)
	copy(mem[len(a):], b)
	put := "/v1/shm/" + sess + "/put"
	get := "/v1/shm/" + sess + "/get"
	items := []shmItem{{Name: "a", Offset: 0, Length: int64(len(a))}, {Name: "b", Offset: int64(len(a)), Length: int64(len(b))}}
	st, res, body := shmCall(t, n, tokAlpha, put, shmRequest{Namespace: nsAlpha, Items: items})
	if st != 200 || res.Results[0].Status != "created" || res.Results[1].Status != "created" || res.Results[1].Size != 5000 {
		t.Fatalf("put: %d %s", st, body)
	}
	// The blocks are ordinary objects: HTTP reads them back.
	r := do(t, n, http.MethodGet, "/v1/objects/a", tokAlpha, map[string]string{HeaderNamespace: nsAlpha}, nil)
	if r.status != 200 || !bytes.Equal(r.body, a) {
		t.Fatalf("GET a: %d, %d bytes", r.status, len(r.body))
	}
	_, res, _ = shmCall(t, n, tokAlpha, put, shmRequest{Namespace: nsAlpha, Items: items[:1]})
	if res.Results[0].Status != "exists" {
		t.Fatalf("second put: %+v", res.Results[0])
	}

	clear(mem)
	from := int64(100)
	st, res, body = shmCall(t, n, tokAlpha, get, shmRequest{Namespace: nsAlpha, Items: []shmItem{
		{Name: "b", Offset: 1000, Length: 8000},             // whole block, room to spare
		{Name: "a", Offset: 10000, Length: 50, From: &from}, // a range
		{Name: "gone", Offset: 0, Length: 10},               // missing
		{Name: "a", Offset: 0, Length: 10},                  // does not fit
		{Name: "a", Offset: 1 << 20, Length: 10},            // outside the segment
		{Name: "b", Offset: 0, Length: 10, From: &from},     // range past the block? no: 100+10 <= 5000
		{Name: "b", Offset: 0, Length: 10, From: ptr(int64(4995))},
	}})
	if st != 200 {
		t.Fatalf("get: %d %s", st, body)
	}
	rs := res.Results
	if rs[0].Status != "ok" || rs[0].Size != 5000 || !bytes.Equal(mem[1000:6000], b) || rs[0].Crc32c != fmt.Sprintf("%08x", block.Checksum(b)) || rs[0].Tier != "dram" {
		t.Fatalf("whole get: %+v", rs[0])
	}
	if rs[1].Status != "ok" || rs[1].Size != 50 || !bytes.Equal(mem[10000:10050], a[100:150]) {
		t.Fatalf("ranged get: %+v", rs[1])
	}
	if rs[2].Status != "missing" {
		t.Fatalf("missing: %+v", rs[2])
	}
	if rs[3].Status != "error" || rs[3].Error.Code != "too_large" {
		t.Fatalf("small room: %+v", rs[3])
	}
	if rs[4].Status != "error" || rs[4].Error.Code != "bad_request" {
		t.Fatalf("outside the segment: %+v", rs[4])
	}
	if rs[5].Status != "ok" || !bytes.Equal(mem[0:10], b[100:110]) {
		t.Fatalf("range: %+v", rs[5])
	}
	if rs[6].Status != "error" || rs[6].Error.Code != "invalid_range" {
		t.Fatalf("range past the end: %+v", rs[6])
	}

	// Another tenant can use neither the session nor the blocks.
	if st, _, body := shmCall(t, n, tokBeta, get, shmRequest{Namespace: nsBeta, Items: items[:1]}); st != 404 {
		t.Fatalf("beta on alpha's session: %d %s", st, body)
	}
	if st, _, _ := shmCall(t, n, tokBeta, get, shmRequest{Namespace: nsAlpha, Items: items[:1]}); st != 403 {
		t.Fatalf("beta in alpha's namespace: %d", st)
	}
	bsess, _ := shmSession(t, n, tokBeta, 4096)
	key := block.OpaqueKey(nsAlpha, []byte("a"))
	_, res, _ = shmCall(t, n, tokBeta, "/v1/shm/"+bsess+"/get", shmRequest{Namespace: nsBeta, Items: []shmItem{{Key: &key, Length: 4096}}})
	if res.Results[0].Status != "missing" {
		t.Fatalf("beta reading alpha's block by key: %+v", res.Results[0])
	}
}

func ptr[T any](v T) *T { return &v }

func TestShmBadRequests(t *testing.T) {
	n := startNode(t, nodeOpts{staging: true})
	sess, _ := shmSession(t, n, "", 4096)
	f := func(path string, req any, status int, code string) {
		t.Helper()
		st, _, body := shmCall(t, n, "", path, req)
		if st != status || !bytes.Contains([]byte(body), []byte(`"`+code+`"`)) {
			t.Fatalf("%s %+v: %d %s, want %d %s", path, req, st, body, status, code)
		}
	}
	put := "/v1/shm/" + sess + "/put"
	f(put, shmRequest{Namespace: nsAlpha}, 400, "bad_request")
	f(put, shmRequest{Namespace: "no", Items: []shmItem{{Name: "a", Length: 1}}}, 400, "invalid_namespace")
	f(put, shmRequest{Namespace: nsAlpha, Items: []shmItem{{Length: 1}}}, 400, "bad_request")
	f(put, shmRequest{Namespace: nsAlpha, Replicas: 2, Items: []shmItem{{Name: "a", Length: 1}}}, 400, "bad_request")
	f(put, map[string]any{"namespace": nsAlpha, "items": []any{}, "extra": 1}, 400, "invalid_json")
	f("/v1/shm/0123/put", shmRequest{Namespace: nsAlpha, Items: []shmItem{{Name: "a", Length: 1}}}, 404, "not_found")
	st, res, _ := shmCall(t, n, "", put, shmRequest{Namespace: nsAlpha, Items: []shmItem{{Name: "a", Offset: 4000, Length: 200}}})
	if st != 200 || res.Results[0].Status != "error" || res.Results[0].Error.Code != "bad_request" {
		t.Fatalf("put outside the segment: %d %+v", st, res)
	}
	if r := do(t, n, http.MethodGet, "/v1/shm", "", nil, nil); r.status != 200 || !bytes.Contains(r.body, []byte(`"socket":"@yuebing-shm-`)) {
		t.Fatalf("GET /v1/shm: %d %s", r.status, r.body)
	}
	off := startNode(t, nodeOpts{})
	if r := do(t, off, http.MethodGet, "/v1/shm", "", nil, nil); r.status != 404 {
		t.Fatalf("GET /v1/shm with shm off: %d %s", r.status, r.body)
	}
}

func TestClearNamespace(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true})
	for i, tc := range []struct{ tok, ns string }{{tokAlpha, nsAlpha}, {tokAlpha, nsAlpha}, {tokAlpha, "alpha/other"}, {tokBeta, nsBeta}} {
		r := do(t, n, http.MethodPut, fmt.Sprintf("/v1/objects/o%d", i), tc.tok, map[string]string{HeaderNamespace: tc.ns}, payload(uint64(i), 100))
		if r.status != 201 {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
	}
	clearNS := func(tok, ns string) rawResponse {
		return do(t, n, http.MethodPost, "/v1/namespaces/clear", tok, nil, []byte(`{"namespace":"`+ns+`"}`))
	}
	if r := clearNS(tokBeta, nsAlpha); r.status != 403 {
		t.Fatalf("beta clearing alpha: %d", r.status)
	}
	r := clearNS(tokAlpha, nsAlpha)
	if r.status != 200 || !bytes.Contains(r.body, []byte(`"deleted":2`)) || !bytes.Contains(r.body, []byte(`"more":false`)) {
		t.Fatalf("clear: %d %s", r.status, r.body)
	}
	if n.store.Len() != 2 {
		t.Fatalf("%d blocks left, want the other namespaces' 2", n.store.Len())
	}
	if r := clearNS(tokAlpha, nsAlpha); !bytes.Contains(r.body, []byte(`"deleted":0`)) {
		t.Fatalf("second clear: %s", r.body)
	}
	if r := clearNS(tokAlpha, "bad"); r.status != 400 {
		t.Fatalf("bad namespace: %d", r.status)
	}
}

func TestShmOnTheSessionSocket(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true, staging: true})
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: n.api.opts.Staging.Addr(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "{\"token\":%q,\"size\":%d}\n", tokAlpha, 1<<16)
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	nb, noob, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil || !bytes.Contains(buf[:nb], []byte(`"session"`)) {
		t.Fatalf("hello: %q %v", buf[:nb], err)
	}
	msgs, _ := unix.ParseSocketControlMessage(oob[:noob])
	fds, _ := unix.ParseUnixRights(&msgs[0])
	mem, err := unix.Mmap(fds[0], 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	r := bufio.NewReader(c)
	call := func(req string) string {
		t.Helper()
		fmt.Fprintln(c, req)
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	copy(mem, "over the socket")
	if got := call(`{"op":"put","namespace":"alpha/llama","items":[{"name":"s","offset":0,"length":15}]}`); !strings.Contains(got, `"status":"created"`) {
		t.Fatalf("put: %s", got)
	}
	if got := call(`{"op":"get","namespace":"alpha/llama","items":[{"name":"s","offset":100,"length":100},{"name":"nope","offset":0,"length":1}]}`); !strings.Contains(got, `"status":"ok"`) || !strings.Contains(got, `"missing"`) || string(mem[100:115]) != "over the socket" {
		t.Fatalf("get: %s / %q", got, mem[100:115])
	}
	for req, code := range map[string]string{
		`{"op":"move","namespace":"alpha/llama","items":[{"name":"s","length":1}]}`: "bad_request",
		`{"op":"get","namespace":"beta/llama","items":[{"name":"s","length":1}]}`:   "forbidden",
		`not json`: "invalid_json",
	} {
		if got := call(req); !strings.Contains(got, `"code":"`+code+`"`) {
			t.Fatalf("%s: %s, want %s", req, got, code)
		}
	}
}

// FuzzServeShm: whatever line a session's client sends, the answer is one
// JSON object and the node neither panics nor touches memory outside the
// segment.
func FuzzServeShm(f *testing.F) {
	f.Add([]byte(`{"op":"put","namespace":"alpha/llama","items":[{"name":"a","offset":0,"length":10}]}`))
	f.Add([]byte(`{"op":"get","namespace":"alpha/llama","items":[{"name":"a","offset":4090,"length":10,"from":5}]}`))
	f.Add([]byte(`{"op":"get","namespace":"alpha/llama","items":[{"key":"00","offset":-1,"length":-1}]}`))
	f.Add([]byte(`{"op":"put","namespace":"alpha/llama","replicas":300,"items":[]}`))
	n := startNode(f, nodeOpts{staging: true})
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: n.api.opts.Staging.Addr(), Net: "unix"})
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "{\"size\":4096}\n")
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	nb, noob, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		f.Fatal(err)
	}
	var a struct{ Session string }
	json.Unmarshal(buf[:nb], &a)
	if msgs, err := unix.ParseSocketControlMessage(oob[:noob]); err == nil && len(msgs) == 1 {
		if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}
	sess, release, err := n.api.opts.Staging.Acquire(a.Session, shmOwner(auth.Open))
	if err != nil {
		f.Fatal(err)
	}
	defer release()
	f.Fuzz(func(t *testing.T, line []byte) {
		out := n.api.ServeShm(t.Context(), sess, line)
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("answer %q is not a JSON object: %v", out, err)
		}
		if _, ok := v["results"]; !ok {
			if _, ok := v["error"]; !ok {
				t.Fatalf("answer %q has neither results nor error", out)
			}
		}
	})
}

// recordHandler signals each record at level Error or above.
type recordHandler struct {
	slog.Handler
	errs chan string
}

func (h recordHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }

func (h recordHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		select {
		case h.errs <- r.Message:
		default:
		}
	}
	return nil
}

// startShmNode starts a whole node with its staging socket, tokens from
// testTokens when auth is set.
func startShmNode(t *testing.T, auth bool, shm ShmConfig) (*Node, chan string) {
	t.Helper()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.HTTP.Listen, cfg.RESP.Listen, cfg.Transfer.Listen = "127.0.0.1:0", "", ""
	cfg.DRAM.Capacity, cfg.SSD.Capacity = 16<<20, 16<<20
	cfg.Conductor.Enabled = false
	shm.Listen = "auto"
	cfg.Shm = shm
	if auth {
		cfg.Auth.TokensFile = filepath.Join(dir, "tokens.yaml")
		if err := os.WriteFile(cfg.Auth.TokensFile, []byte(testTokens), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan string, 16)
	cfg.Logger = slog.New(recordHandler{slog.DiscardHandler, errs})
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	return n, errs
}

// shmHello asks addr for a session and returns the answer line; the
// descriptor, if any, is closed. The connection (the session) stays open
// until the test ends.
func shmHello(t *testing.T, addr, token string, size int) string {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "{\"token\":%q,\"size\":%d}\n", token, size)
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	nb, noob, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	if msgs, err := unix.ParseSocketControlMessage(oob[:noob]); err == nil && len(msgs) == 1 {
		if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}
	return string(buf[:nb])
}

// The staging socket is a local convenience: when it stops serving, the
// node logs it and goes on serving HTTP instead of shutting down.
func TestShmSocketStoppingLeavesTheNode(t *testing.T) {
	n, errs := startShmNode(t, false, ShmConfig{})
	n.staging.Listener().Close()
	select {
	case err := <-n.Failed():
		t.Fatalf("the node failed: %v", err)
	case msg := <-errs:
		if !strings.Contains(msg, "shm") {
			t.Fatalf("logged %q", msg)
		}
	}
	resp, err := http.Get("http://" + n.Addr("http").String() + "/v1/shm")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/shm: %d", resp.StatusCode)
	}
	select {
	case err := <-n.Failed():
		t.Fatalf("the node failed: %v", err)
	default:
	}
}

// One tenant's sessions stop at shm.max_sessions_per_tenant; another
// tenant still gets one, and the node exports the refusal.
func TestShmTenantQuota(t *testing.T) {
	n, _ := startShmNode(t, true, ShmConfig{MaxOwnerSessions: 2})
	addr := n.staging.Addr()
	for range 2 {
		if a := shmHello(t, addr, tokAlpha, 4096); !strings.Contains(a, `"session"`) {
			t.Fatalf("alpha: %s", a)
		}
	}
	if a := shmHello(t, addr, tokAlpha, 4096); !strings.Contains(a, `"overloaded"`) || !strings.Contains(a, "quota") {
		t.Fatalf("alpha over its quota: %s", a)
	}
	if a := shmHello(t, addr, tokBeta, 4096); !strings.Contains(a, `"session"`) {
		t.Fatalf("beta: %s", a)
	}
	resp, err := http.Get("http://" + n.Addr("http").String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"yuebing_shm_sessions 3", "yuebing_shm_quota_refusals_total 1", "yuebing_shm_accept_errors_total 0"} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestShmAuthThrottle: wrong tokens on the staging socket count against
// the same throttle as HTTP and Redis, so a local user cannot guess
// tokens there at socket speed; past the allowance the right token is
// refused too, without being looked at.
func TestShmAuthThrottle(t *testing.T) {
	n, _ := startShmNode(t, true, ShmConfig{})
	addr := n.staging.Addr()
	failures := 0
	for range 100 {
		a := shmHello(t, addr, "not-a-token", 4096)
		if strings.Contains(a, "too many") {
			break
		}
		failures++
	}
	if failures == 0 || failures >= 100 {
		t.Fatalf("%d wrong tokens were looked at before the throttle answered", failures)
	}
	if a := shmHello(t, addr, tokAlpha, 4096); strings.Contains(a, `"session"`) {
		t.Fatalf("a throttled source got a session: %s", a)
	}
}
