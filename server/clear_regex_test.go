package server

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
)

// TestClearNamespaceRegex checks Mooncake's remove_by_regex as the node
// serves it: only the namespace's objects whose name the regex matches
// anywhere go, blocks without a name stay, and a bad regex is refused
// before anything is deleted.
func TestClearNamespaceRegex(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true})
	for i, name := range []string{"layer0_tp_0", "layer0_tp_1", "layer1_tp_0", "other"} {
		r := do(t, n, http.MethodPut, "/v1/objects/"+name, tokAlpha, map[string]string{HeaderNamespace: nsAlpha}, payload(uint64(i), 100))
		if r.status != 201 {
			t.Fatalf("put %s: %d %s", name, r.status, r.body)
		}
	}
	if r := do(t, n, http.MethodPut, "/v1/objects/layer0_tp_0", tokAlpha, map[string]string{HeaderNamespace: "alpha/other"}, payload(9, 100)); r.status != 201 {
		t.Fatalf("put in another namespace: %d %s", r.status, r.body)
	}
	clear := func(regex string) rawResponse {
		t.Helper()
		return do(t, n, http.MethodPost, "/v1/namespaces/clear", tokAlpha, nil,
			[]byte(fmt.Sprintf(`{"namespace":%q,"regex":%q}`, nsAlpha, regex)))
	}
	if r := clear("layer(0"); r.status != 400 || !bytes.Contains(r.body, []byte(`"bad_request"`)) {
		t.Fatalf("bad regex: %d %s", r.status, r.body)
	}
	if n.store.Len() != 5 {
		t.Fatalf("%d blocks after a refused clear, want 5", n.store.Len())
	}
	if r := clear("_tp_0$"); r.status != 200 || !bytes.Contains(r.body, []byte(`"deleted":2`)) {
		t.Fatalf("clear _tp_0$: %d %s", r.status, r.body)
	}
	for name, want := range map[string]int{"layer0_tp_0": 404, "layer1_tp_0": 404, "layer0_tp_1": 200, "other": 200} {
		if r := do(t, n, http.MethodHead, "/v1/objects/"+name, tokAlpha, map[string]string{HeaderNamespace: nsAlpha}, nil); r.status != want {
			t.Fatalf("HEAD %s after the clear: %d, want %d", name, r.status, want)
		}
	}
	if r := do(t, n, http.MethodHead, "/v1/objects/layer0_tp_0", tokAlpha, map[string]string{HeaderNamespace: "alpha/other"}, nil); r.status != 200 {
		t.Fatalf("the other namespace's object: %d", r.status)
	}
}
