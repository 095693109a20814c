package server

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/cluster"
)

// A batch exists through any node of a cluster finds what HEAD finds:
// blocks and objects another node holds, in the prefix, as "remote"; a
// block of another tenant stays missing, as its HEAD does.
func TestBatchExistsSeesTheCluster(t *testing.T) {
	e, err := cluster.StartEmbedded(cluster.EmbedOptions{Dir: t.TempDir(), ClientListen: "127.0.0.1:0", PeerListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	a := startClusterNode(t, e.Endpoint(), "a")
	b := startClusterNode(t, e.Endpoint(), "b")
	ns := map[string]string{HeaderNamespace: nsAlpha}
	for _, name := range []string{"o1", "o2"} {
		if r := do(t, a.testNode, http.MethodPut, "/v1/objects/"+name, tokAlpha, ns, payload(3, 4000)); r.status/100 != 2 {
			t.Fatalf("put %s on a: %d %s", name, r.status, r.body)
		}
	}
	if r := do(t, b.testNode, http.MethodPut, "/v1/objects/o3", tokAlpha, ns, payload(4, 4000)); r.status/100 != 2 {
		t.Fatalf("put o3 on b: %d %s", r.status, r.body)
	}
	// Another tenant's object: its key, asked for as a raw key under
	// alpha's namespace, is not alpha's to see.
	if r := do(t, a.testNode, http.MethodPut, "/v1/objects/secret", tokBeta, map[string]string{HeaderNamespace: nsBeta}, payload(5, 100)); r.status/100 != 2 {
		t.Fatalf("put beta's object: %d %s", r.status, r.body)
	}
	foreign := block.OpaqueKey(nsBeta, []byte("secret"))

	exists := func(body string) existsResponse {
		t.Helper()
		r := do(t, b.testNode, http.MethodPost, "/v1/batch/exists", tokAlpha, nil, []byte(body))
		if r.status != http.StatusOK {
			t.Fatalf("batch exists: %d %s", r.status, r.body)
		}
		var res existsResponse
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	names := `{"namespace":"` + nsAlpha + `","names":["o1","o2","o3","none"]}`
	// The leader's index learns a's blocks from its reports.
	deadline := time.Now().Add(20 * time.Second)
	res := exists(names)
	for !res.Exists[0] && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		res = exists(names)
	}
	want := []bool{true, true, true, false}
	for i, w := range want {
		if res.Exists[i] != w {
			t.Fatalf("exists %v, want %v (tiers %q)", res.Exists, want, res.Tiers)
		}
	}
	if res.PrefixLen != 3 || res.Tiers[0] != "remote" || res.Tiers[3] != "" {
		t.Errorf("prefix %d, tiers %q: want 3 and o1 remote", res.PrefixLen, res.Tiers)
	}
	if head := do(t, b.testNode, http.MethodHead, "/v1/objects/o1", tokAlpha, ns, nil); head.status != http.StatusOK {
		t.Errorf("HEAD o1 on b: %d", head.status)
	}

	res = exists(`{"namespace":"` + nsAlpha + `","keys":["` + foreign.String() + `"]}`)
	if res.Exists[0] || res.PrefixLen != 0 {
		t.Errorf("another tenant's block through b: exists %v", res.Exists)
	}
	if head := do(t, b.testNode, http.MethodHead, "/v1/blocks/"+foreign.String(), tokAlpha, ns, nil); head.status != http.StatusNotFound {
		t.Errorf("HEAD of another tenant's block on b: %d, want 404", head.status)
	}
}
