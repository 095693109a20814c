package adapter_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/internal/servetest"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/tcp"
)

// transferEngine starts an rdma engine presenting token.
func transferEngine(t testing.TB, token string) *rdma.Engine {
	t.Helper()
	tr, err := tcp.New(tcp.Options{Topology: rdma.Topology{rdma.AnyLocation: {Preferred: []string{"127.0.0.1:0"}}}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := rdma.New(rdma.Options{ClusterToken: token}, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestLoadOverTransferService loads from a node in a cluster by key over
// its transfer service, as an engine on another host would; an engine
// whose token the node refuses loads the same bytes over HTTP.
func TestLoadOverTransferService(t *testing.T) {
	const token = "adapter-test-cluster-token"
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	proc, url := servetest.Serve(t, "--transfer-listen", "127.0.0.1:0", "--cluster", "adaptertest", "--node-name", "a",
		"--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0", "--cluster-token-file", tokFile)
	addr := proc.Banner["transfer"]
	if addr == "" || addr == "disabled" {
		t.Fatalf("no transfer address in the banner: %v", proc.Banner)
	}
	for _, tc := range []struct {
		name     string
		token    string
		fallback bool
	}{{"by key", token, false}, {"refused, over HTTP", "a-token-the-node-does-not-know", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := transferEngine(t, tc.token)
			c := connector(t, url, func(o *adapter.Options) { o.DisableShm, o.Transfer, o.TransferAddr = true, e, addr })
			toks := tokens(7, 4*16)
			store(t, c, toks)
			plan, err := c.Lookup(t.Context(), toks)
			if err != nil || plan.HitBlocks != 4 {
				t.Fatalf("plan %+v, %v", plan, err)
			}
			dst := newPool(len(plan.Keys))
			res, err := c.Load(t.Context(), plan, dst).Result(t.Context())
			if err != nil || res.Err != nil || res.Blocks != 4 {
				t.Fatalf("load: %+v, %v", res, err)
			}
			for l := range testLayout.Layers {
				checkLayer(t, dst, plan.Keys, l, 4)
			}
			s := c.Stats()
			if s.TransferLoadRequests == 0 || (s.TransferFallbacks > 0) != tc.fallback || s.ShmLoadRequests != 0 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

func TestTransferOptions(t *testing.T) {
	_, err := adapter.New(adapter.Options{TransferAddr: "127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "Options.Transfer and") {
		t.Fatalf("TransferAddr without Transfer: %v", err)
	}
}
