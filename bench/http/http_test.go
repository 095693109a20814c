package http

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/server"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/ssd"
)

func TestRunHTTP(t *testing.T) {
	d, err := dram.New(dram.Options{Capacity: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssd.Open(ssd.Options{Dir: filepath.Join(t.TempDir(), "ssd"), Capacity: 64 << 20, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	h, err := tier.NewHierarchy([]tier.Tier{d, s}, tier.HierarchyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	api, err := server.NewAPI(server.APIOptions{Store: h})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	rep, err := Run(t.Context(), Options{Addr: srv.URL, ValueSize: 64 << 10, Concurrency: 2, GetWeight: 1, PutWeight: 1, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bench.Row{}
	for _, r := range rep.Results {
		names[r["name"].(string)] = r
	}
	for _, n := range []string{"tcp_get", "http_get", "tcp_put", "http_put"} {
		r, ok := names[n]
		if !ok {
			t.Fatalf("no %s row in %v", n, rep.Results)
		}
		if r["gbps"].(float64) <= 0 || r["errors"].(int64) != 0 {
			t.Errorf("%s: %v", n, r)
		}
	}
	if g := names["http_get"]; g["baseline"] != "tcp_get" || g["ratio"].(float64) <= 0 {
		t.Errorf("http_get lacks its baseline: %v", g)
	}
	if st := h.Stats(); st.Tiers[0].Puts < 2 {
		t.Errorf("puts did not reach the store: %+v", st.Tiers[0])
	}
}

// TestRunInProcessNode runs without Addr: Run starts a node of its own in
// the data directory it is given and measures it.
func TestRunInProcessNode(t *testing.T) {
	dir := t.TempDir()
	rep, err := Run(t.Context(), Options{ValueSize: 64 << 10, Concurrency: 2, GetWeight: 1, PutWeight: 1, Duration: 300 * time.Millisecond,
		Node: NodeOptions{DRAMCapacity: 64 << 20, DataDir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, r := range rep.Results {
		rows[r["name"].(string)] = r["gbps"].(float64) > 0 && r["errors"].(int64) == 0
	}
	if !rows["http_get"] || !rows["http_put"] {
		t.Fatalf("rows %v", rep.Results)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
		t.Errorf("the node did not use its data directory: %v %v", entries, err)
	}
}
