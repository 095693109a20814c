package cluster

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The pending changes are bounded: past MaxPending keys the reporter
// forgets them and asks for a full resync instead.
func TestPendingOverflowFallsBackToResync(t *testing.T) {
	r := newReporter(&Node{opts: Options{MaxPending: 4, MaxHitKeys: 2, HitSampling: 1}})
	r.mu.needFull = false
	for i := range 4 {
		r.touch(testKey(i))
	}
	if len(r.mu.dirty) != 4 || r.mu.needFull {
		t.Fatalf("%d dirty, needFull %v", len(r.mu.dirty), r.mu.needFull)
	}
	r.touch(testKey(2)) // already pending: no growth
	r.touch(testKey(9))
	if len(r.mu.dirty) != 0 || !r.mu.needFull {
		t.Fatalf("after overflow: %d dirty, needFull %v", len(r.mu.dirty), r.mu.needFull)
	}
	// Hits are bounded by key, not by access.
	for range 10 {
		r.accessed(testKey(1), 100)
		r.accessed(testKey(2), 100)
		r.accessed(testKey(3), 100)
	}
	if len(r.mu.hits) != 2 || r.mu.hits[testKey(1)].Count != 10 || r.mu.hits[testKey(1)].Size != 100 {
		t.Fatalf("hits %v", r.mu.hits)
	}
}

func TestInternalAPIRejectsBadInput(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	c.waitFormed()
	addr := c.nodes[0].addr
	f := func(path, token, body string, status int, code string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://"+addr+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != status || !strings.Contains(string(b), code) {
			t.Errorf("%s: %d %s, want %d %s", path, resp.StatusCode, b, status, code)
		}
	}
	const tok = "test-cluster-token"
	f("/internal/v1/has", "", `{}`, 401, "unauthorized")
	f("/internal/v1/has", "wrong", `{}`, 401, "unauthorized")
	f("/internal/v1/report", tok, "garbage", 400, "bad_report")
	f("/internal/v1/has", tok, `{"keys":["zz"]}`, 400, "bad_request")
	f("/internal/v1/has", tok, `{"keys":["`+testKey(1).String()+`"],"x":1}`, 400, "bad_request")
	// Blocks go over the transfer service only.
	f("/internal/v1/read", tok, `{"keys":["`+testKey(1).String()+`"]}`, 404, "not_found")
	f("/internal/v1/has", tok, `{"keys":"x"}`, 400, "bad_request")
	f("/internal/v1/forget", tok, `{"keys":[1]}`, 400, "bad_request")
	f("/internal/v1/drop", tok, `{"key":"`+testKey(1).String()+`","term":1}`, 409, "not_leader")
	f("/internal/v1/desired", tok, `{"key":"`+testKey(1).String()+`","count":0}`, 400, "bad_request")
	f("/internal/v1/name", tok, `{"namespace":1}`, 400, "bad_request")
	f("/internal/v1/name", tok, `{"namespace":"a/redis","name":"k"}`, 404, "not_found")
	f("/internal/v1/nothing", tok, `{}`, 404, "not_found")
	// A report of a node that is not a member, in the right term.
	li, _ := c.nodes[0].n.Leader()
	f("/internal/v1/report", tok, string(appendReport(nil, &report{Node: 77, Term: uint64(li.Term)})), 409, "not_member")
	f("/internal/v1/report", tok, string(appendReport(nil, &report{Node: 0, Term: uint64(li.Term) + 1})), 409, "not_leader")
}
