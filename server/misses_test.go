package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/yuebing/yuebing/block"
)

// wantReads checks the store's hits and misses as /metrics and the
// console's GET /v1/stats report them. Every block of these tests sits in
// DRAM, so DRAM's misses are the store's.
func wantReads(t *testing.T, n *testNode, hits, misses int) {
	t.Helper()
	m := do(t, n, http.MethodGet, "/metrics", "", nil, nil).body
	for _, want := range []string{
		fmt.Sprintf("yuebing_store_hits_total %d\n", hits),
		fmt.Sprintf("yuebing_store_misses_total %d\n", misses),
		fmt.Sprintf("yuebing_tier_hits_total{tier=\"dram\"} %d\n", hits),
		fmt.Sprintf("yuebing_tier_misses_total{tier=\"dram\"} %d\n", misses),
	} {
		if !bytes.Contains(m, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}
	var st statsResponse
	r := do(t, n, http.MethodGet, "/v1/stats", tokAdmin, nil, nil)
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatalf("stats: %d %s: %v", r.status, r.body, err)
	}
	if st.Store.Hits != int64(hits) || st.Store.Misses != int64(misses) {
		t.Errorf("console stats: %d hits, %d misses; want %d, %d", st.Store.Hits, st.Store.Misses, hits, misses)
	}
}

// Every HTTP read of data is one hit or one miss of the store: a block or
// an object not stored, another tenant's, a batch's missing frames.
// Existence checks (HEAD, batch exists) and context views are lookups and
// count neither.
func TestHTTPReadsCountHitsAndMisses(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true})
	ns := map[string]string{HeaderNamespace: nsAlpha}
	k := chain(t, nsAlpha, 1, 3)[0]
	absent := chain(t, nsAlpha, 2, 4)
	if r := do(t, n, http.MethodPut, "/v1/blocks/"+k.String(), tokAlpha, ns, payload(1, 4096)); r.status != 201 {
		t.Fatalf("put block: %d %s", r.status, r.body)
	}
	if r := do(t, n, http.MethodPut, "/v1/objects/doc", tokAlpha, ns, payload(2, 4096)); r.status != 201 {
		t.Fatalf("put object: %d %s", r.status, r.body)
	}
	wantReads(t, n, 0, 0)

	get := func(path, token string, want int) {
		t.Helper()
		if r := do(t, n, http.MethodGet, path, token, ns, nil); r.status != want {
			t.Fatalf("GET %s: %d %s, want %d", path, r.status, r.body, want)
		}
	}
	get("/v1/blocks/"+k.String(), tokAlpha, 200)         // hit
	get("/v1/blocks/"+k.String(), tokAdmin, 200)         // hit, read without the owner check
	get("/v1/objects/doc", tokAlpha, 200)                // hit
	get("/v1/blocks/"+absent[0].String(), tokAlpha, 404) // miss
	get("/v1/blocks/"+absent[0].String(), tokAdmin, 404) // miss, without the owner check
	get("/v1/objects/nothing", tokAlpha, 404)            // miss
	get("/v1/blocks/"+k.String(), tokBeta, 404)          // miss: alpha's block

	batch := func(path string, keys []block.Key) {
		t.Helper()
		body, _ := json.Marshal(keysRequest{Namespace: nsAlpha, Keys: keys})
		if r := do(t, n, http.MethodPost, path, tokAlpha, nil, body); r.status != 200 {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
	}
	batch("/v1/batch/get", []block.Key{k, absent[0], absent[1]}) // a hit, two misses

	// Lookups: neither hits nor misses.
	do(t, n, http.MethodHead, "/v1/blocks/"+absent[0].String(), tokAlpha, ns, nil)
	do(t, n, http.MethodHead, "/v1/blocks/"+k.String(), tokAlpha, ns, nil)
	do(t, n, http.MethodHead, "/v1/objects/nothing", tokAlpha, ns, nil)
	batch("/v1/batch/exists", []block.Key{k, absent[0]})
	wantReads(t, n, 4, 6)
}

// A shared-memory get is a read like HTTP's: each item found is a hit,
// each missing one (absent, another tenant's) a miss.
func TestShmReadsCountHitsAndMisses(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true, staging: true})
	sess, mem := shmSession(t, n, tokAlpha, 1<<20)
	copy(mem, payload(1, 5000))
	st, _, body := shmCall(t, n, tokAlpha, "/v1/shm/"+sess+"/put", shmRequest{Namespace: nsAlpha, Items: []shmItem{{Name: "a", Length: 5000}}})
	if st != 200 {
		t.Fatalf("put: %d %s", st, body)
	}
	st, res, body := shmCall(t, n, tokAlpha, "/v1/shm/"+sess+"/get", shmRequest{Namespace: nsAlpha, Items: []shmItem{
		{Name: "a", Offset: 0, Length: 5000},
		{Name: "gone", Offset: 0, Length: 10},
		{Name: "a", Offset: 5000, Length: 5000},
	}})
	if st != 200 || res.Results[0].Status != "ok" || res.Results[1].Status != "missing" || res.Results[2].Status != "ok" {
		t.Fatalf("get: %d %s", st, body)
	}
	bsess, _ := shmSession(t, n, tokBeta, 4096)
	key := block.OpaqueKey(nsAlpha, []byte("a"))
	_, res, _ = shmCall(t, n, tokBeta, "/v1/shm/"+bsess+"/get", shmRequest{Namespace: nsBeta, Items: []shmItem{{Key: &key, Length: 4096}}})
	if res.Results[0].Status != "missing" {
		t.Fatalf("beta reading alpha's block by key: %+v", res.Results[0])
	}
	wantReads(t, n, 2, 2)
}
