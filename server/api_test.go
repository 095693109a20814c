package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/block/frame"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/server/staging"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/ssd"
)

// Tokens of the test tenants.
const (
	tokAlpha = "alpha-token-0123456789"
	tokBeta  = "beta-token-0123456789a"
	tokAdmin = "admin-token-0123456789"
	nsAlpha  = "alpha/llama"
	nsBeta   = "beta/llama"
)

const testTokens = tokAlpha + ": {tenant: alpha, role: tenant}\n" +
	tokBeta + ": {tenant: beta, role: tenant}\n" +
	tokAdmin + ": {tenant: ops, role: admin}\n"

// testNode is an API over a real DRAM + SSD store, served on a real
// loopback listener.
type testNode struct {
	api   *API
	store *tier.Hierarchy
	srv   *httptest.Server
	dir   string
}

type nodeOpts struct {
	auth     bool
	dram     int64
	limits   Limits
	contexts ContextsConfig
	dir      string
	now      func() time.Time
	// conductor mounts the embedded conductor, as `yuebing serve` does.
	conductor bool
	// staging serves the /v1/shm endpoints on an abstract unix socket.
	staging bool
}

func newTestStore(t testing.TB, dir string, dramCap int64) *tier.Hierarchy {
	t.Helper()
	d, err := dram.New(dram.Options{Capacity: dramCap})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssd.Open(ssd.Options{Dir: filepath.Join(dir, "ssd"), Capacity: 64 << 20, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	h, err := tier.NewHierarchy([]tier.Tier{d, s}, tier.HierarchyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func startNode(t testing.TB, o nodeOpts) *testNode {
	t.Helper()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	if o.dram == 0 {
		o.dram = 16 << 20
	}
	store := newTestStore(t, o.dir, o.dram)
	var toks *auth.Tokens
	if o.auth {
		var err error
		if toks, err = auth.Parse([]byte(testTokens)); err != nil {
			t.Fatal(err)
		}
	}
	opts := APIOptions{
		Store: store, Tokens: toks, Limits: o.limits, Contexts: o.contexts,
		ContextsFile: filepath.Join(o.dir, "contexts.json"), Now: o.now,
	}
	var api *API
	if o.staging {
		handle := func(ctx context.Context, sess *staging.Session, line []byte) []byte {
			return api.ServeShm(ctx, sess, line)
		}
		st, err := newStaging(ShmConfig{Listen: "auto", MaxSessionBytes: 8 << 20, MaxBytes: 16 << 20, MaxSessions: 4}, toks, handle, nil)
		if err != nil {
			t.Fatal(err)
		}
		go st.Serve()
		t.Cleanup(func() { st.Close() })
		opts.Staging = st
	}
	if o.conductor {
		cc := ConductorConfig{Enabled: true}
		cc.ensureDefaults()
		_, svc, err := newConductor(cc, o.limits)
		if err != nil {
			t.Fatal(err)
		}
		opts.Mount = func(v1 gin.IRouter) {
			svc.Register(v1.Group("", func(c *gin.Context) { api.AdminOnly(c) }))
		}
	}
	api, err := NewAPI(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	n := &testNode{api: api, store: store, srv: srv, dir: o.dir}
	t.Cleanup(n.close)
	return n
}

func (n *testNode) close() {
	n.srv.Close()
	n.api.Close()
	n.store.Close()
}

func (n *testNode) client(t testing.TB, token string) *client.Client {
	t.Helper()
	c, err := client.New(n.srv.URL, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func chain(t testing.TB, ns string, blocks int, seed uint32) []block.Key {
	t.Helper()
	tokens := make([]uint32, 16*blocks)
	for i := range tokens {
		tokens[i] = seed*100000 + uint32(i)
	}
	keys, err := block.ChainKeys(ns, 16, tokens)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestBlockLifecycle(t *testing.T) {
	n := startNode(t, nodeOpts{})
	c := n.client(t, "")
	ctx := t.Context()
	keys := chain(t, nsAlpha, 3, 1)
	data := payload(1, 100_000)

	res, err := c.Put(ctx, nsAlpha, keys[0], data)
	if err != nil || !res.Created || res.Tier != "dram" || res.Size != int64(len(data)) {
		t.Fatalf("Put = %+v, %v", res, err)
	}
	res, err = c.Put(ctx, nsAlpha, keys[0], data)
	if err != nil || res.Created {
		t.Fatalf("second Put = %+v, %v; want Created false", res, err)
	}
	got, info, err := c.Get(ctx, keys[0], client.GetOptions{})
	if err != nil || !bytes.Equal(got, data) || info.Tier != "dram" || info.Checksum != block.Checksum(data) {
		t.Fatalf("Get: %v, info %+v", err, info)
	}
	// A layer's slice of the block.
	r, err := c.Open(ctx, keys[0], client.GetOptions{Offset: 1000, Length: 500})
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(part, data[1000:1500]) || r.Info.Size != int64(len(data)) {
		t.Fatalf("range read got %d bytes, size %d", len(part), r.Info.Size)
	}
	st, err := c.Stat(ctx, keys[0], nsAlpha)
	if err != nil || st.Size != int64(len(data)) || st.Namespace != nsAlpha {
		t.Fatalf("Stat = %+v, %v", st, err)
	}
	if _, err := c.Stat(ctx, keys[0], "alpha/other"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Stat under another namespace = %v, want ErrNotFound", err)
	}
	if err := c.Delete(ctx, keys[0], ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(ctx, keys[0], client.GetOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Get after Delete = %v", err)
	}
	if err := c.Delete(ctx, keys[0], ""); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("second Delete = %v", err)
	}
	// An empty block is a block.
	if _, err := c.Put(ctx, nsAlpha, keys[1], nil); err != nil {
		t.Fatal(err)
	}
	if got, _, err := c.Get(ctx, keys[1], client.GetOptions{}); err != nil || len(got) != 0 {
		t.Fatalf("empty block: %q, %v", got, err)
	}
}

func TestObjects(t *testing.T) {
	n := startNode(t, nodeOpts{})
	c := n.client(t, "")
	ctx := t.Context()
	names := []string{"plain", "with/slash/es", "odd ?#%&=+ chars", "ünïcode@rank0@hash"}
	for i, name := range names {
		data := payload(uint64(i), 1000+i)
		if _, err := c.PutObject(ctx, nsAlpha, name, data); err != nil {
			t.Fatalf("PutObject(%q): %v", name, err)
		}
		got, _, err := c.GetObject(ctx, nsAlpha, name)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("GetObject(%q): %v", name, err)
		}
		// The object is the block of its opaque key.
		k := block.OpaqueKey(nsAlpha, []byte(name))
		if got, _, err := c.Get(ctx, k, client.GetOptions{}); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get by opaque key of %q: %v", name, err)
		}
		if _, _, err := c.GetObject(ctx, "alpha/other", name); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("GetObject in another namespace: %v", err)
		}
	}
	m, err := c.ExistsNames(ctx, nsAlpha, []string{names[0], names[1], "absent", names[2]})
	if err != nil || m.PrefixLen != 2 || !m.Exists[3] || m.Exists[2] {
		t.Fatalf("ExistsNames = %+v, %v", m, err)
	}
	// A chained-key put of an object's key is refused: it is recorded as
	// the object.
	k := block.OpaqueKey(nsAlpha, []byte(names[0]))
	if _, err := c.Put(ctx, nsAlpha, k, []byte("x")); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("Put over an object's key = %v, want ErrConflict", err)
	}
	got := 0
	err = c.GetBatchNames(ctx, nsAlpha, []string{names[1], "absent"}, func(f client.Frame, r io.Reader) error {
		if !f.Missing {
			got++
			if f.Key != block.OpaqueKey(nsAlpha, []byte(names[1])) {
				return fmt.Errorf("frame key %s", f.Key)
			}
		}
		return nil
	})
	if err != nil || got != 1 {
		t.Fatalf("GetBatchNames: %v, %d found", err, got)
	}
	if n, err := c.DeleteBatchNames(ctx, nsAlpha, []string{names[3], "absent"}); err != nil || n != 1 {
		t.Fatalf("DeleteBatchNames = %d, %v", n, err)
	}
	if err := c.DeleteObject(ctx, nsAlpha, names[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatObject(ctx, nsAlpha, names[0]); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("StatObject after delete = %v", err)
	}
}

func TestBatch(t *testing.T) {
	n := startNode(t, nodeOpts{})
	c := n.client(t, "")
	ctx := t.Context()
	keys := chain(t, nsAlpha, 6, 2)
	var items []client.Item
	for i, k := range keys[:4] {
		items = append(items, client.Item{Key: k, Data: payload(uint64(i), 5000*(i+1))})
	}
	res, err := c.PutBatch(ctx, nsAlpha, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != "created" || r.Key != keys[i] || r.Tier != "dram" {
			t.Fatalf("result %d = %+v", i, r)
		}
	}
	// Again: every item exists; one more is new.
	res, err = c.PutBatch(ctx, nsAlpha, append(items[:2:2], client.Item{Key: keys[4], Data: []byte("five")}))
	if err != nil || res[0].Status != "exists" || res[1].Status != "exists" || res[2].Status != "created" {
		t.Fatalf("second PutBatch = %+v, %v", res, err)
	}
	m, err := c.Exists(ctx, nsAlpha, keys)
	if err != nil || m.PrefixLen != 5 || m.PrefixTiers["dram"] != 5 || m.Exists[5] || m.Tiers[5] != "" {
		t.Fatalf("Exists = %+v, %v", m, err)
	}
	// Multi-get, with a missing key in the middle.
	want := map[block.Key][]byte{}
	for _, it := range items {
		want[it.Key] = it.Data
	}
	order := []block.Key{keys[0], keys[5], keys[3], keys[1]}
	i := 0
	err = c.GetBatch(ctx, nsAlpha, order, func(f client.Frame, r io.Reader) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if f.Key != order[i] {
			return fmt.Errorf("frame %d is key %s, want %s", i, f.Key, order[i])
		}
		if (i == 1) != f.Missing || !bytes.Equal(data, want[f.Key]) {
			return fmt.Errorf("frame %d: missing %v, %d bytes", i, f.Missing, len(data))
		}
		i++
		return nil
	})
	if err != nil || i != len(order) {
		t.Fatalf("GetBatch: %v after %d frames", err, i)
	}
	deleted, err := c.DeleteBatch(ctx, nsAlpha, []block.Key{keys[0], keys[5], keys[1]})
	if err != nil || deleted != 2 {
		t.Fatalf("DeleteBatch = %d, %v", deleted, err)
	}
	if m, _ := c.Exists(ctx, nsAlpha, keys); m.PrefixLen != 0 || !m.Exists[2] {
		t.Fatalf("after DeleteBatch: %+v", m)
	}
}

func TestBatchPutItemErrors(t *testing.T) {
	n := startNode(t, nodeOpts{})
	keys := chain(t, nsAlpha, 3, 3)
	// A frame with a wrong checksum fails alone; the frames around it are
	// stored.
	body := frames(t, []testFrame{
		{key: keys[0], data: []byte("good one")},
		{key: keys[1], data: []byte("bad crc"), crc: 1, hasCRC: true},
		{key: keys[2], data: []byte("good two")},
	})
	resp := do(t, n, "POST", "/v1/batch/put", "", map[string]string{HeaderNamespace: nsAlpha}, body)
	var out batchPutResponse
	if err := json.Unmarshal(resp.body, &out); err != nil || resp.status != 200 || len(out.Results) != 3 {
		t.Fatalf("batch put: %d %s", resp.status, resp.body)
	}
	if out.Results[0].Status != "created" || out.Results[1].Status != "error" || out.Results[1].Error.Code != "checksum_mismatch" || out.Results[2].Status != "created" {
		t.Fatalf("results = %s", resp.body)
	}
	if n.store.Contains(keys[1]) {
		t.Fatal("the frame with a bad checksum was stored")
	}
	// A body cut inside a frame: 400, the frames before it listed.
	body = frames(t, []testFrame{{key: keys[1], data: []byte("fine")}, {key: chain(t, nsAlpha, 4, 9)[3], data: []byte("truncated body")}})
	resp = do(t, n, "POST", "/v1/batch/put", "", map[string]string{HeaderNamespace: nsAlpha}, body[:len(body)-3])
	var bad batchPutError
	if err := json.Unmarshal(resp.body, &bad); err != nil || resp.status != 400 || bad.Error.Code != "bad_request" || len(bad.Results) != 1 {
		t.Fatalf("truncated batch put: %d %s", resp.status, resp.body)
	}
}

type testFrame struct {
	key    block.Key
	data   []byte
	crc    uint32
	hasCRC bool
	flags  uint32
	length int64 // overrides len(data) when non-zero
}

func frames(t testing.TB, fs []testFrame) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(frame.Magic)
	for _, f := range fs {
		h := frame.Header{Key: f.key, Flags: f.flags, CRC: f.crc, Length: uint64(len(f.data))}
		if f.hasCRC {
			h.Flags |= frame.FlagCRC
		}
		if f.length != 0 {
			h.Length = uint64(f.length)
		}
		var hb [frame.HeaderSize]byte
		h.Encode(&hb)
		b.Write(hb[:])
		b.Write(f.data)
	}
	return b.Bytes()
}

type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// do sends a raw request, for inputs the client would never produce.
func do(t *testing.T, n *testNode, method, path, token string, hdr map[string]string, body []byte) rawResponse {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, n.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: b}
}

// storeState is what the store holds, to check that a refused request
// changed nothing.
func storeState(t *testing.T, h *tier.Hierarchy) string {
	t.Helper()
	var b strings.Builder
	st := h.Stats()
	fmt.Fprintf(&b, "blocks=%d", st.Blocks)
	for _, ts := range st.Tiers {
		fmt.Fprintf(&b, " %s:puts=%d,deletes=%d,used=%d,pinned=%d", ts.Name, ts.Puts, ts.Deletes, ts.Used, ts.Pinned)
	}
	h.Scan(0, 1<<20, func(k block.Key, e index.Entry) bool {
		fmt.Fprintf(&b, " %s/%d/%d", k, e.Size, e.PinnedUntil)
		return true
	})
	return b.String()
}

func TestBadInput(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true, limits: Limits{MaxBlockSize: 1 << 20, MaxBatchKeys: 4}})
	ctx := t.Context()
	ca := n.client(t, tokAlpha)
	keys := chain(t, nsAlpha, 4, 4)
	stored := payload(4, 4096)
	if _, err := ca.Put(ctx, nsAlpha, keys[0], stored); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.CreateContext(ctx, client.ContextSpec{Namespace: nsAlpha, Keys: keys[:1], TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	k0, k1 := keys[0].String(), keys[1].String()
	ns := map[string]string{HeaderNamespace: nsAlpha}
	with := func(kv ...string) map[string]string {
		m := map[string]string{HeaderNamespace: nsAlpha}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	keysJSON := func(n int) []byte {
		ks := make([]string, n)
		for i := range ks {
			ks[i] = k1
		}
		b, _ := json.Marshal(map[string]any{"namespace": nsAlpha, "keys": ks})
		return b
	}
	cases := []struct {
		name, method, path, token string
		hdr                       map[string]string
		body                      []byte
		status                    int
		code                      string
	}{
		{"bad hex", "GET", "/v1/blocks/" + strings.Repeat("zz", 32), tokAlpha, nil, nil, 400, "invalid_key"},
		{"uppercase hex", "PUT", "/v1/blocks/" + strings.ToUpper(k1), tokAlpha, ns, []byte("x"), 400, "invalid_key"},
		{"short key", "PUT", "/v1/blocks/" + k1[:62], tokAlpha, ns, []byte("x"), 400, "invalid_key"},
		{"long key", "GET", "/v1/blocks/" + k1 + "00", tokAlpha, nil, nil, 400, "invalid_key"},
		{"no namespace on put", "PUT", "/v1/blocks/" + k1, tokAlpha, nil, []byte("x"), 400, "bad_request"},
		{"bad namespace", "PUT", "/v1/blocks/" + k1, tokAlpha, map[string]string{HeaderNamespace: "no-slash"}, []byte("x"), 400, "invalid_namespace"},
		{"oversize body", "PUT", "/v1/blocks/" + k1, tokAlpha, ns, make([]byte, 1<<20+1), 413, "too_large"},
		{"wrong checksum", "PUT", "/v1/blocks/" + k1, tokAlpha, with(HeaderCRC, "00000000"), []byte("payload"), 422, "checksum_mismatch"},
		{"malformed checksum", "PUT", "/v1/blocks/" + k1, tokAlpha, with(HeaderCRC, "xyz"), []byte("payload"), 400, "bad_request"},
		{"size disagrees", "PUT", "/v1/blocks/" + k1, tokAlpha, with(HeaderSize, "3"), []byte("payload"), 400, "bad_request"},
		{"bad range", "GET", "/v1/blocks/" + k0, tokAlpha, map[string]string{"Range": "bytes=9999-"}, nil, 416, "invalid_range"},
		{"reversed range", "GET", "/v1/blocks/" + k0, tokAlpha, map[string]string{"Range": "bytes=10-5"}, nil, 416, "invalid_range"},
		{"multi range", "GET", "/v1/blocks/" + k0, tokAlpha, map[string]string{"Range": "bytes=0-1,4-5"}, nil, 416, "invalid_range"},
		{"unknown route", "GET", "/v1/nothing", tokAlpha, nil, nil, 404, "no_route"},
		{"wrong method", "POST", "/v1/blocks/" + k0, tokAlpha, nil, nil, 405, "method_not_allowed"},
		{"malformed json", "POST", "/v1/batch/exists", tokAlpha, nil, []byte(`{"namespace":`), 400, "invalid_json"},
		{"unknown json field", "POST", "/v1/keys", tokAlpha, nil, []byte(`{"namespace":"alpha/llama","tokenz":[1]}`), 400, "invalid_json"},
		{"token out of range", "POST", "/v1/keys", tokAlpha, nil, []byte(`{"namespace":"alpha/llama","tokens":[4294967296]}`), 400, "invalid_json"},
		{"bad block size", "POST", "/v1/keys", tokAlpha, nil, []byte(`{"namespace":"alpha/llama","block_size":7,"tokens":[1]}`), 400, "invalid_block_size"},
		{"negative ttl", "POST", "/v1/contexts", tokAlpha, nil, []byte(`{"namespace":"alpha/llama","keys":["` + k0 + `"],"ttl_seconds":-5}`), 400, "bad_request"},
		{"ttl over max", "POST", "/v1/contexts", tokAlpha, nil, []byte(`{"namespace":"alpha/llama","keys":["` + k0 + `"],"ttl_seconds":999999999}`), 400, "bad_request"},
		{"missing ttl", "POST", "/v1/contexts", tokAlpha, nil, []byte(`{"namespace":"alpha/llama","keys":["` + k0 + `"]}`), 400, "bad_request"},
		{"bad context id", "GET", "/v1/contexts/xyz", tokAlpha, nil, nil, 400, "bad_request"},
		{"unknown context", "GET", "/v1/contexts/" + strings.Repeat("ab", 16), tokAlpha, nil, nil, 404, "not_found"},
		{"missing token", "GET", "/v1/blocks/" + k0, "", nil, nil, 401, "unauthenticated"},
		{"unknown token", "GET", "/v1/blocks/" + k0, "not-a-known-token-at-all", nil, nil, 401, "unauthenticated"},
		{"foreign token reads", "GET", "/v1/blocks/" + k0, tokBeta, nil, nil, 404, "not_found"},
		{"foreign token deletes", "DELETE", "/v1/blocks/" + k0, tokBeta, nil, nil, 404, "not_found"},
		{"foreign namespace put", "PUT", "/v1/blocks/" + k1, tokBeta, ns, []byte("x"), 403, "forbidden"},
		{"foreign batch", "POST", "/v1/batch/exists", tokBeta, nil, keysJSON(1), 403, "forbidden"},
		{"tenant reads stats", "GET", "/v1/stats", tokAlpha, nil, nil, 403, "forbidden"},
		{"too many keys", "POST", "/v1/batch/get", tokAlpha, nil, keysJSON(5), 413, "too_large"},
		{"too many keys to delete", "POST", "/v1/batch/delete", tokAlpha, nil, keysJSON(5), 413, "too_large"},
		{"too many frames", "POST", "/v1/batch/put", tokAlpha, ns, frames(t, []testFrame{{key: keys[0], data: stored}, {key: keys[0], data: stored}, {key: keys[0], data: stored}, {key: keys[0], data: stored}, {key: keys[0], data: stored}}), 413, "too_large"},
		{"frame over block limit", "POST", "/v1/batch/put", tokAlpha, ns, frames(t, []testFrame{{key: keys[1], length: 1<<20 + 1}}), 413, "too_large"},
		{"frame with unknown flags", "POST", "/v1/batch/put", tokAlpha, ns, frames(t, []testFrame{{key: keys[1], data: []byte("x"), flags: 1 << 7}}), 400, "bad_request"},
		{"frames without magic", "POST", "/v1/batch/put", tokAlpha, ns, []byte("nope"), 400, "bad_request"},
		{"existing key, other namespace", "PUT", "/v1/blocks/" + k0, tokAlpha, map[string]string{HeaderNamespace: "alpha/other"}, stored, 409, "conflict"},
		{"object name too long", "PUT", "/v1/objects/" + strings.Repeat("n", 300), tokAlpha, ns, []byte("x"), 400, "bad_request"},
	}
	before := storeState(t, n.store)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, n, tc.method, tc.path, tc.token, tc.hdr, tc.body)
			var eb errorBody
			if err := json.Unmarshal(resp.body, &eb); err != nil && tc.method != "HEAD" {
				t.Fatalf("%d, body %q is not a JSON error", resp.status, resp.body)
			}
			if resp.status != tc.status || eb.Error.Code != tc.code || eb.Error.Message == "" {
				t.Fatalf("got %d %q, want %d %q (body %s)", resp.status, eb.Error.Code, tc.status, tc.code, resp.body)
			}
			if after := storeState(t, n.store); after != before {
				t.Fatalf("the store changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	got, _, err := ca.Get(ctx, keys[0], client.GetOptions{})
	if err != nil || !bytes.Equal(got, stored) {
		t.Fatalf("stored block after the bad inputs: %v", err)
	}
}

func TestLengthRequired(t *testing.T) {
	n := startNode(t, nodeOpts{})
	k := chain(t, nsAlpha, 1, 5)[0]
	put := func(hdr map[string]string, body io.Reader) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), "PUT", n.srv.URL+"/v1/blocks/"+k.String(), body)
		req.ContentLength = -1 // chunked
		req.Header.Set(HeaderNamespace, nsAlpha)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if s, b := put(nil, io.NopCloser(strings.NewReader("chunked"))); s != 411 || !strings.Contains(b, "length_required") {
		t.Fatalf("chunked put without a size: %d %s", s, b)
	}
	if s, b := put(map[string]string{HeaderSize: "3"}, io.NopCloser(strings.NewReader("chunked"))); s != 400 || n.store.Contains(k) {
		t.Fatalf("chunked put longer than its size: %d %s", s, b)
	}
	if s, b := put(map[string]string{HeaderSize: "7"}, io.NopCloser(strings.NewReader("chunked"))); s != 201 {
		t.Fatalf("chunked put with its size: %d %s", s, b)
	}
}

func TestTenantIsolation(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true})
	ctx := t.Context()
	ca, cb, cadm := n.client(t, tokAlpha), n.client(t, tokBeta), n.client(t, tokAdmin)
	tokens := make([]uint32, 64)
	for i := range tokens {
		tokens[i] = uint32(i * 7)
	}
	// Identical tokens, two tenants: different keys.
	ka, err := ca.Keys(ctx, nsAlpha, 16, tokens)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := cb.Keys(ctx, nsBeta, 16, tokens)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ka {
		if ka[i] == kb[i] {
			t.Fatalf("key %d shared between tenants", i)
		}
	}
	if _, err := cb.Keys(ctx, nsAlpha, 16, tokens); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("beta keying alpha's namespace: %v", err)
	}
	a0 := payload(10, 2048)
	if _, err := ca.Put(ctx, nsAlpha, ka[0], a0); err != nil {
		t.Fatal(err)
	}
	// Beta cannot see, read, delete or claim alpha's block.
	if _, _, err := cb.Get(ctx, ka[0], client.GetOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("beta Get = %v", err)
	}
	if err := cb.Delete(ctx, ka[0], ""); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("beta Delete = %v", err)
	}
	if m, err := cb.Exists(ctx, nsBeta, ka[:1]); err != nil || m.Exists[0] {
		t.Fatalf("beta Exists of alpha's key = %+v, %v", m, err)
	}
	if _, err := cb.Put(ctx, nsBeta, ka[0], []byte("poison")); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("beta Put of alpha's key = %v, want ErrConflict", err)
	}
	if _, err := cb.CreateContext(ctx, client.ContextSpec{Namespace: nsAlpha, Keys: ka[:1], TTL: time.Minute}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("beta context in alpha's namespace = %v", err)
	}
	// Beta's context over alpha's key neither pins nor reveals it.
	bc, err := cb.CreateContext(ctx, client.ContextSpec{Namespace: nsBeta, Keys: ka[:1], TTL: time.Minute})
	if err != nil || bc.Missing != 1 {
		t.Fatalf("beta context over alpha's key = %+v, %v", bc, err)
	}
	if st, _, _ := n.store.Stat(ka[0]); !st.PinnedUntil.IsZero() {
		t.Fatal("beta's context pinned alpha's block")
	}
	if _, err := ca.Context(ctx, bc.ID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("alpha reading beta's context = %v", err)
	}
	page, err := ca.ListContexts(ctx, client.ListOptions{})
	if err != nil || len(page.Contexts) != 0 {
		t.Fatalf("alpha lists %+v, %v", page, err)
	}
	// Alpha still reads its block; the admin reads everything.
	if got, _, err := ca.Get(ctx, ka[0], client.GetOptions{}); err != nil || !bytes.Equal(got, a0) {
		t.Fatalf("alpha Get = %v", err)
	}
	if got, _, err := cadm.Get(ctx, ka[0], client.GetOptions{}); err != nil || !bytes.Equal(got, a0) {
		t.Fatalf("admin Get = %v", err)
	}
	if page, err := cadm.ListContexts(ctx, client.ListOptions{}); err != nil || len(page.Contexts) != 1 {
		t.Fatalf("admin lists %+v, %v", page, err)
	}
	if _, err := cadm.Stats(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestContextLifecycle(t *testing.T) {
	var clock fakeClock
	clock.set(time.Unix(1_800_000_000, 0))
	dir := t.TempDir()
	n := startNode(t, nodeOpts{dir: dir, now: clock.now})
	c := n.client(t, "")
	ctx := t.Context()
	tokens := make([]uint32, 16*4)
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	keys, _ := block.ChainKeys(nsAlpha, 16, tokens)
	for i, k := range keys[:3] {
		if _, err := c.Put(ctx, nsAlpha, k, payload(uint64(i), 1000)); err != nil {
			t.Fatal(err)
		}
	}
	cx, err := c.CreateContext(ctx, client.ContextSpec{Namespace: nsAlpha, Name: "system prompt", Tokens: tokens, BlockSize: 16, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(cx.Keys) != 4 || cx.Keys[3] != keys[3] || cx.Resident["dram"] != 3 || cx.Missing != 1 || cx.Tiers[3] != "" || cx.TTLSeconds != 3600 {
		t.Fatalf("created %+v", cx)
	}
	pinned := func(k block.Key) time.Time {
		st, _, _ := n.store.Stat(k)
		return st.PinnedUntil
	}
	if got := pinned(keys[0]); !got.Equal(clock.now().Add(time.Hour)) {
		t.Fatalf("pin = %v", got)
	}
	// The missing block is pinned as it arrives.
	if _, err := c.Put(ctx, nsAlpha, keys[3], []byte("late")); err != nil {
		t.Fatal(err)
	}
	if pinned(keys[3]).IsZero() {
		t.Fatal("a block put after its context was created is not pinned")
	}
	// A second, longer context over the first two blocks raises their pin;
	// deleting it lowers it back.
	cx2, err := c.CreateContext(ctx, client.ContextSpec{Namespace: nsAlpha, Keys: keys[:2], TTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !pinned(keys[1]).Equal(clock.now().Add(2*time.Hour)) || !pinned(keys[2]).Equal(clock.now().Add(time.Hour)) {
		t.Fatal("pins are not the latest deadline")
	}
	if err := c.DeleteContext(ctx, cx2.ID); err != nil {
		t.Fatal(err)
	}
	if !pinned(keys[1]).Equal(clock.now().Add(time.Hour)) {
		t.Fatalf("pin after deleting the longer context = %v", pinned(keys[1]))
	}
	if err := c.DeleteContext(ctx, cx2.ID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("second delete = %v", err)
	}
	// Extend, then list.
	clock.add(30 * time.Minute)
	ext, err := c.ExtendContext(ctx, cx.ID, 3*time.Hour)
	if err != nil || !ext.ExpiresAt.Equal(clock.now().Add(3*time.Hour)) || !pinned(keys[0]).Equal(ext.ExpiresAt) {
		t.Fatalf("extend: %+v, %v", ext, err)
	}
	page, err := c.ListContexts(ctx, client.ListOptions{Namespace: nsAlpha})
	if err != nil || len(page.Contexts) != 1 || page.Contexts[0].Name != "system prompt" || page.Contexts[0].Blocks != 4 {
		t.Fatalf("list: %+v, %v", page, err)
	}
	// Contexts and their pins survive a restart, as a node shuts down:
	// DRAM flushed to SSD, which keeps blocks but not DRAM's pins.
	if _, err := n.store.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n.close()
	n2 := startNode(t, nodeOpts{dir: dir, now: clock.now})
	c2 := n2.client(t, "")
	got, err := c2.Context(ctx, cx.ID)
	if err != nil || !got.ExpiresAt.Equal(ext.ExpiresAt) || got.Resident["ssd"] != 4 || got.Missing != 0 {
		t.Fatalf("after restart: %+v, %v", got, err)
	}
	if st, _, _ := n2.store.Stat(keys[0]); !st.PinnedUntil.Equal(ext.ExpiresAt) {
		t.Fatalf("pin after restart = %v, want %v", st.PinnedUntil, ext.ExpiresAt)
	}
	// Expiry: past the deadline the context is gone.
	clock.add(3*time.Hour + time.Second)
	if _, err := c2.Context(ctx, cx.ID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("expired context: %v", err)
	}
}

func TestContextPagination(t *testing.T) {
	n := startNode(t, nodeOpts{contexts: ContextsConfig{MaxContexts: 7}})
	c := n.client(t, "")
	ctx := t.Context()
	k := chain(t, nsAlpha, 1, 6)
	ids := map[string]bool{}
	for range 7 {
		cx, err := c.CreateContext(ctx, client.ContextSpec{Namespace: nsAlpha, Keys: k, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ids[cx.ID] = true
	}
	if _, err := c.CreateContext(ctx, client.ContextSpec{Namespace: nsAlpha, Keys: k, TTL: time.Minute}); !errors.Is(err, client.ErrOverloaded) {
		t.Fatalf("context over the limit: %v", err)
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		p, err := c.ListContexts(ctx, client.ListOptions{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, s := range p.Contexts {
			if seen[s.ID] || !ids[s.ID] {
				t.Fatalf("page %d lists %s again or unknown", pages, s.ID)
			}
			seen[s.ID] = true
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 7 || pages != 3 {
		t.Fatalf("listed %d contexts in %d pages", len(seen), pages)
	}
}

func TestOverloaded(t *testing.T) {
	// A budget of one block: while a put holds it, the next waits
	// QueueTimeout and gets 429.
	n := startNode(t, nodeOpts{limits: Limits{MaxBlockSize: 64 << 10, MaxBatchBytes: 64 << 10, MaxInflightBytes: 64 << 10, QueueTimeout: 50 * time.Millisecond}})
	release, err := n.api.reserve(t.Context(), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	k := chain(t, nsAlpha, 1, 7)[0]
	resp := do(t, n, "PUT", "/v1/blocks/"+k.String(), "", map[string]string{HeaderNamespace: nsAlpha}, make([]byte, 1000))
	if resp.status != 429 || resp.header.Get("Retry-After") == "" || !bytes.Contains(resp.body, []byte("overloaded")) {
		t.Fatalf("put while the budget is used up: %d %s", resp.status, resp.body)
	}
	if n.store.Contains(k) {
		t.Fatal("the refused put stored the block")
	}
	release()
	if resp := do(t, n, "PUT", "/v1/blocks/"+k.String(), "", map[string]string{HeaderNamespace: nsAlpha}, make([]byte, 1000)); resp.status != 201 {
		t.Fatalf("put after release: %d %s", resp.status, resp.body)
	}
}

func TestSSDReadsAndMetrics(t *testing.T) {
	// A DRAM tier too small for the block sends it to SSD; reading it
	// back is charged to the budget and reported per tier.
	n := startNode(t, nodeOpts{dram: 1 << 20})
	c := n.client(t, "")
	ctx := t.Context()
	k := chain(t, nsAlpha, 1, 8)[0]
	data := payload(8, 3<<20)
	res, err := c.Put(ctx, nsAlpha, k, data)
	if err != nil || res.Tier != "ssd" {
		t.Fatalf("Put = %+v, %v", res, err)
	}
	got, info, err := c.Get(ctx, k, client.GetOptions{})
	if err != nil || !bytes.Equal(got, data) || info.Tier != "ssd" {
		t.Fatalf("Get from SSD: %+v, %v", info, err)
	}
	// The handler gives the budget back after the last byte is sent,
	// which may be just after the client has it.
	for deadline := time.Now().Add(5 * time.Second); n.api.budget.Budget().InUse() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("budget not given back: %d", n.api.budget.Budget().InUse())
		}
	}
	metrics, err := c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp := rawResponse{body: metrics}
	for _, want := range []string{
		`yuebing_tier_hits_total{tier="ssd"} 1`,
		`yuebing_tier_capacity_bytes{tier="dram"}`,
		`yuebing_tier_evictions_total{tier="dram"}`,
		`yuebing_tier_demotions_total{tier="dram"}`,
		`yuebing_tier_promotions_total{tier="dram"}`,
		`yuebing_http_request_duration_seconds_bucket{code="201",method="PUT",route="/v1/blocks/:key",le=`,
		`yuebing_http_request_duration_seconds_count{code="200",method="GET",route="/v1/blocks/:key"} 1`,
	} {
		if !bytes.Contains(resp.body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if bytes.Contains(resp.body, []byte(k.String())) {
		t.Error("a raw path leaked into a metric label")
	}
}

// fakeClock drives context deadlines in tests.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// TestFramedBodyExample posts the worked example of docs/api.md byte for
// byte.
func TestFramedBodyExample(t *testing.T) {
	n := startNode(t, nodeOpts{})
	const example = "59 42 46 31" +
		" 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f" +
		" 01 00 00 00 4c bb 71 9a 05 00 00 00 00 00 00 00 68 65 6c 6c 6f"
	body, err := hex.DecodeString(strings.ReplaceAll(example, " ", ""))
	if err != nil || len(body) != 57 {
		t.Fatalf("example: %d bytes, %v", len(body), err)
	}
	resp := do(t, n, "POST", "/v1/batch/put", "", map[string]string{HeaderNamespace: nsAlpha}, body)
	if resp.status != 200 || !bytes.Contains(resp.body, []byte(`"status":"created"`)) {
		t.Fatalf("example multi-put: %d %s", resp.status, resp.body)
	}
	var k block.Key
	for i := range k {
		k[i] = byte(i)
	}
	if resp := do(t, n, "GET", "/v1/blocks/"+k.String(), "", nil, nil); string(resp.body) != "hello" || resp.header.Get(HeaderCRC) != "9a71bb4c" {
		t.Fatalf("example block: %q, crc %s", resp.body, resp.header.Get(HeaderCRC))
	}
}

// TestEmbeddedConductor: the conductor answers under /v1/conductor on the
// node's own listener, and with authentication on only an admin may use it.
func TestEmbeddedConductor(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true, conductor: true})
	do := func(token, method, path, body string) int {
		req, _ := http.NewRequest(method, n.srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	inst := `{"id":"p0","role":"prefill","addr":"10.0.0.1:8000"}`
	if got := do("", "GET", "/v1/conductor/instances", ""); got != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", got)
	}
	if got := do(tokAlpha, "POST", "/v1/conductor/instances", inst); got != http.StatusForbidden {
		t.Fatalf("tenant registering an instance: %d", got)
	}
	if got := do(tokAdmin, "POST", "/v1/conductor/instances", inst); got != http.StatusCreated {
		t.Fatalf("admin registering an instance: %d", got)
	}
	if got := do(tokAdmin, "GET", "/v1/conductor/instances/p0", ""); got != http.StatusOK {
		t.Fatalf("admin reading the instance: %d", got)
	}
}
