package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/bytesize"
	"github.com/yuebing/yuebing/tier"
)

// startRetentionNode is startNode with a pinned quota (nil: the default),
// over the store in dir, so a test can restart it.
func startRetentionNode(t *testing.T, dir string, quota *bytesize.Size) *testNode {
	t.Helper()
	store := newTestStore(t, dir, 16<<20)
	api, err := NewAPI(APIOptions{
		Store: store, ContextsFile: filepath.Join(dir, "contexts.json"),
		Registry: prometheus.NewRegistry(), Retention: RetentionOptions{PinnedQuota: quota},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{api: api, store: store, srv: httptest.NewServer(api.Handler()), dir: dir}
	t.Cleanup(n.close)
	return n
}

func putWith(t *testing.T, n *testNode, k block.Key, data []byte, hdr map[string]string) rawResponse {
	t.Helper()
	h := map[string]string{HeaderNamespace: nsAlpha}
	for k, v := range hdr {
		h[k] = v
	}
	return do(t, n, "PUT", "/v1/blocks/"+k.String(), "", h, data)
}

func errorCode(t *testing.T, r rawResponse) string {
	t.Helper()
	var b errorBody
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	return b.Error.Code
}

func TestRetentionHeaderErrors(t *testing.T) {
	n := startRetentionNode(t, t.TempDir(), nil)
	k := chain(t, nsAlpha, 1, 1)[0]
	for _, hdr := range []map[string]string{
		{HeaderRetention: "forever"},
		{HeaderRetention: "PINNED"},
		{HeaderRetention: "pinned", HeaderRetentionTTL: "-5"},
		{HeaderRetention: "pinned", HeaderRetentionTTL: "1.5"},
		{HeaderRetention: "pinned", HeaderRetentionTTL: "999999999999"},
		{HeaderRetentionTTL: "60"},
	} {
		r := putWith(t, n, k, []byte("x"), hdr)
		if r.status != 400 || errorCode(t, r) != "bad_request" || !strings.Contains(string(r.body), "X-Yuebing-Retention") {
			t.Errorf("put with %v: %d %s; want 400 naming the header", hdr, r.status, r.body)
		}
	}
	if n.store.Contains(k) {
		t.Fatal("a refused put stored its block")
	}
}

// TestPinQuota: hard pins are bounded per namespace; a put over the quota
// fails with 409 pin_quota and stores nothing; releasing (a put with
// another class, the retention endpoint, a delete) makes room.
func TestPinQuota(t *testing.T) {
	q := bytesize.Size(300_000)
	n := startRetentionNode(t, t.TempDir(), &q)
	keys := chain(t, nsAlpha, 6, 2)
	pinned := map[string]string{HeaderRetention: "pinned"}
	for i := range 3 {
		if r := putWith(t, n, keys[i], payload(uint64(i), 100_000), pinned); r.status != 201 {
			t.Fatalf("pinned put %d: %d %s", i, r.status, r.body)
		}
	}
	if got := n.api.PinnedBytes()[nsAlpha]; got != 300_000 {
		t.Fatalf("pinned bytes %d, want 300000", got)
	}
	r := putWith(t, n, keys[3], payload(3, 100_000), pinned)
	if r.status != 409 || errorCode(t, r) != "pin_quota" {
		t.Fatalf("put over the quota: %d %s; want 409 pin_quota", r.status, r.body)
	}
	if n.store.Contains(keys[3]) {
		t.Fatal("a put over the quota stored its block")
	}
	// Unpinned puts are not bounded by it.
	if r := putWith(t, n, keys[4], payload(4, 100_000), map[string]string{HeaderRetention: "high"}); r.status != 201 {
		t.Fatalf("high put: %d %s", r.status, r.body)
	}
	// A put of a stored block with another class releases it.
	if r := putWith(t, n, keys[0], payload(0, 100_000), map[string]string{HeaderRetention: "normal"}); r.status != 200 {
		t.Fatalf("re-put as normal: %d %s", r.status, r.body)
	}
	if info, _, _ := n.store.Stat(keys[0]); info.Retention != tier.RetentionNormal {
		t.Fatalf("re-put as normal left class %s", info.Retention)
	}
	if r := putWith(t, n, keys[3], payload(3, 100_000), pinned); r.status != 201 {
		t.Fatalf("pinned put after a release: %d %s", r.status, r.body)
	}
	// The endpoint: one block over the quota fails alone.
	body := fmt.Sprintf(`{"namespace":%q,"keys":[%q,%q],"retention":"pinned"}`, nsAlpha, keys[4], keys[0])
	r = do(t, n, "POST", "/v1/batch/retention", "", nil, []byte(body))
	var out retentionResponse
	if err := json.Unmarshal(r.body, &out); err != nil || r.status != 200 || len(out.Results) != 2 {
		t.Fatalf("retention: %d %s", r.status, r.body)
	}
	if out.Results[0].Status != "error" || out.Results[0].Error.Code != "pin_quota" {
		t.Fatalf("pinning over the quota: %+v", out.Results[0])
	}
	body = fmt.Sprintf(`{"namespace":%q,"keys":[%q],"retention":"low"}`, nsAlpha, keys[1])
	if r := do(t, n, "POST", "/v1/batch/retention", "", nil, []byte(body)); r.status != 200 || !strings.Contains(string(r.body), `"ok"`) {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
	if info, _, _ := n.store.Stat(keys[1]); info.Retention != tier.RetentionLow {
		t.Fatalf("released block has class %s", info.Retention)
	}
	// A delete gives its pin back.
	if r := do(t, n, "DELETE", "/v1/blocks/"+keys[2].String(), "", map[string]string{HeaderNamespace: nsAlpha}, nil); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if got := n.api.PinnedBytes()[nsAlpha]; got != 100_000 {
		t.Fatalf("pinned bytes %d after releases, want 100000 (keys[3] only)", got)
	}
	for _, bad := range []string{`{"namespace":"alpha/llama","keys":[],"retention":"sticky"}`, `{"namespace":"alpha/llama","keys":[]}`} {
		if r := do(t, n, "POST", "/v1/batch/retention", "", nil, []byte(bad)); r.status != 400 {
			t.Errorf("retention %s: %d %s", bad, r.status, r.body)
		}
	}
}

func TestPinQuotaZeroRefusesPins(t *testing.T) {
	q := bytesize.Size(0)
	n := startRetentionNode(t, t.TempDir(), &q)
	k := chain(t, nsAlpha, 1, 5)[0]
	if r := putWith(t, n, k, []byte("abc"), map[string]string{HeaderRetention: "pinned"}); r.status != 409 {
		t.Fatalf("pin with a zero quota: %d %s", r.status, r.body)
	}
	if r := putWith(t, n, k, []byte("abc"), map[string]string{HeaderRetention: "low"}); r.status != 201 {
		t.Fatalf("low put: %d %s", r.status, r.body)
	}
}

// TestPinQuotaLapse: a pin with a TTL stops counting once it ends.
func TestPinQuotaLapse(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	q, err := newPinQuota(100, func() time.Time { return now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := chain(t, nsAlpha, 3, 13)
	if _, err := q.charge(nsAlpha, keys[0], 60, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.charge(nsAlpha, keys[1], 60, time.Time{}); !errors.Is(err, ErrPinQuota) {
		t.Fatalf("charge over the quota: %v", err)
	}
	// Another namespace has a quota of its own.
	if _, err := q.charge("beta/llama", keys[2], 100, time.Time{}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := q.charge(nsAlpha, keys[1], 60, time.Time{}); err != nil {
		t.Fatalf("charge after the pin lapsed: %v", err)
	}
	if u := q.usage(); u[nsAlpha] != 60 || u["beta/llama"] != 100 {
		t.Fatalf("usage %v", u)
	}
	// Charging a block again only moves its end.
	if fresh, err := q.charge(nsAlpha, keys[1], 60, time.Time{}); err != nil || fresh {
		t.Fatalf("second charge: %v, fresh %v", err, fresh)
	}
}

// TestPinSurvivesRestart: a hard pin and its class are kept by the SSD
// tier across a restart (after the shutdown's flush), and charged to the
// namespace again.
func TestPinSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	n := startRetentionNode(t, dir, nil)
	keys := chain(t, nsAlpha, 2, 7)
	if r := putWith(t, n, keys[0], payload(7, 50_000), map[string]string{HeaderRetention: "pinned"}); r.status != 201 {
		t.Fatalf("pinned put: %d %s", r.status, r.body)
	}
	if r := putWith(t, n, keys[1], payload(8, 50_000), map[string]string{HeaderRetention: "high", HeaderRetentionTTL: "3600"}); r.status != 201 {
		t.Fatalf("high put: %d %s", r.status, r.body)
	}
	if _, err := n.store.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	n.close()

	n = startRetentionNode(t, dir, nil)
	info, _, err := n.store.Stat(keys[0])
	if err != nil || info.Retention != tier.RetentionPinned {
		t.Fatalf("pinned block after a restart: %v, class %s", err, info.Retention)
	}
	info, _, err = n.store.Stat(keys[1])
	if err != nil || info.Retention != tier.RetentionHigh || time.Until(info.RetainUntil) < 59*time.Minute {
		t.Fatalf("high block after a restart: %v, class %s until %v", err, info.Retention, info.RetainUntil)
	}
	if got := n.api.PinnedBytes()[nsAlpha]; got != 50_000 {
		t.Fatalf("pinned bytes after a restart %d, want 50000", got)
	}
}

func TestBatchPutRetention(t *testing.T) {
	q := bytesize.Size(10_000)
	n := startRetentionNode(t, t.TempDir(), &q)
	keys := chain(t, nsAlpha, 3, 9)
	body := frames(t, []testFrame{
		{key: keys[0], data: payload(1, 6000)},
		{key: keys[1], data: payload(2, 6000)}, // over the quota
		{key: keys[2], data: payload(3, 3000)},
	})
	r := do(t, n, "POST", "/v1/batch/put", "", map[string]string{HeaderNamespace: nsAlpha, HeaderRetention: "pinned"}, body)
	var out batchPutResponse
	if err := json.Unmarshal(r.body, &out); err != nil || r.status != 200 || len(out.Results) != 3 {
		t.Fatalf("batch put: %d %s", r.status, r.body)
	}
	if out.Results[0].Status != "created" || out.Results[1].Status != "error" || out.Results[1].Error.Code != "pin_quota" || out.Results[2].Status != "created" {
		t.Fatalf("batch put results: %s", r.body)
	}
	if n.store.Contains(keys[1]) {
		t.Fatal("a frame over the quota was stored")
	}
	if info, _, _ := n.store.Stat(keys[2]); info.Retention != tier.RetentionPinned {
		t.Fatalf("batch-put block has class %s", info.Retention)
	}
	r = do(t, n, "POST", "/v1/batch/put", "", map[string]string{HeaderNamespace: nsAlpha, HeaderRetention: "sometimes"}, body)
	if r.status != 400 || !strings.Contains(string(r.body), HeaderRetention) {
		t.Fatalf("batch put with a bad class: %d %s", r.status, r.body)
	}
}

func TestContextRetention(t *testing.T) {
	q := bytesize.Size(150_000)
	n := startRetentionNode(t, t.TempDir(), &q)
	keys := chain(t, nsAlpha, 3, 11)
	for i, k := range keys {
		if r := putWith(t, n, k, payload(uint64(i), 60_000), nil); r.status != 201 {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
	}
	ctxBody := func(ks []block.Key, retention string) []byte {
		b, _ := json.Marshal(map[string]any{"namespace": nsAlpha, "keys": ks, "ttl_seconds": 600, "retention": retention})
		return b
	}
	// Three blocks of 60 kB pinned would pass 150 kB: refused, nothing changed.
	r := do(t, n, "POST", "/v1/contexts", "", nil, ctxBody(keys, "pinned"))
	if r.status != 409 || errorCode(t, r) != "pin_quota" {
		t.Fatalf("context over the quota: %d %s", r.status, r.body)
	}
	for _, k := range keys {
		if info, _, _ := n.store.Stat(k); info.Retention != tier.RetentionNormal {
			t.Fatalf("a refused context changed a block's class to %s", info.Retention)
		}
	}
	if got := n.api.PinnedBytes()[nsAlpha]; got != 0 {
		t.Fatalf("a refused context left %d bytes charged", got)
	}
	r = do(t, n, "POST", "/v1/contexts", "", nil, ctxBody(keys[:2], "pinned"))
	if r.status != 201 {
		t.Fatalf("context: %d %s", r.status, r.body)
	}
	for _, k := range keys[:2] {
		info, _, _ := n.store.Stat(k)
		if info.Retention != tier.RetentionPinned || time.Until(info.RetainUntil) < 9*time.Minute {
			t.Fatalf("context block: class %s until %v; want pinned for the context's life", info.Retention, info.RetainUntil)
		}
	}
	if r := do(t, n, "POST", "/v1/contexts", "", nil, ctxBody(keys[2:], "sticky")); r.status != 400 {
		t.Fatalf("context with a bad retention: %d %s", r.status, r.body)
	}
}

func FuzzParseRetention(f *testing.F) {
	for _, s := range [][2]string{{"pinned", ""}, {"low", "60"}, {"", ""}, {"high", "-1"}, {"normal", "99999999999999999999"}} {
		f.Add(s[0], s[1])
	}
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, class, ttl string) {
		r, err := parseRetention(class, ttl, now)
		if err != nil {
			if !strings.Contains(err.Error(), "X-Yuebing-Retention") {
				t.Fatalf("error %q does not name the header", err)
			}
			return
		}
		if !r.class.Valid() || r.set != (class != "") {
			t.Fatalf("parseRetention(%q, %q) = %+v", class, ttl, r)
		}
		if !r.until.IsZero() && (!r.until.After(now) || r.until.Sub(now) > maxRetentionTTL) {
			t.Fatalf("parseRetention(%q, %q): until %v", class, ttl, r.until)
		}
	})
}

// TestPinQuotaReconciles: a pinned block deleted behind the API's back (a
// namespace cleared, RESP, a replica dropped) stops counting before a put
// would be refused.
func TestPinQuotaReconciles(t *testing.T) {
	q := bytesize.Size(100_000)
	n := startRetentionNode(t, t.TempDir(), &q)
	keys := chain(t, nsAlpha, 2, 17)
	pinned := map[string]string{HeaderRetention: "pinned"}
	if r := putWith(t, n, keys[0], payload(1, 80_000), pinned); r.status != 201 {
		t.Fatalf("pinned put: %d %s", r.status, r.body)
	}
	if err := n.store.Delete(keys[0]); err != nil {
		t.Fatal(err)
	}
	if r := putWith(t, n, keys[1], payload(2, 80_000), pinned); r.status != 201 {
		t.Fatalf("pinned put after the store deleted the first: %d %s", r.status, r.body)
	}
	if got := n.api.PinnedBytes()[nsAlpha]; got != 80_000 {
		t.Fatalf("pinned bytes %d, want 80000", got)
	}
}
