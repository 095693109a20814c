package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/internal/servetest"
)

// A small replay against a real node: three conversations of four turns, the
// turns 8 s apart in the trace. Round robin over two engines with an odd
// number of conversations sends each turn to the other engine than the
// conversation's last, so only the pool holds a previous turn's blocks there
// (with an even number every conversation would stay on one engine, and the
// pool's hits would hang on HBM evictions, that is on timing). Every hit is
// loaded (LoadAlways): whether a load pays is timing, and the test is about
// what the pool adds.
func TestRunE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("replays against a real node; skipped with -short")
	}
	var lines []string
	for turn := range 4 {
		for c := 1; c <= 3; c++ {
			ids := []string{"0"}
			for i := 0; i <= turn+1; i++ {
				ids = append(ids, fmt.Sprint(c*100+i))
			}
			lines = append(lines, fmt.Sprintf(`{"timestamp": %d, "input_length": %d, "output_length": 3, "hash_ids": [%s]}`,
				(turn*8+c)*1000, 512*(turn+2)+100, strings.Join(ids, ", ")))
		}
	}
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(trace, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, url := servetest.Serve(t, "--dram-capacity", "256MiB")
	o := Options{Trace: trace, Addr: url, Requests: 12, Scale: 10, TimeScale: 0.01,
		LoadBlocks: 4, OnlyRunLayout: true, Quick: true, LoadAlways: true, Rounds: 2}
	o.Progress = bench.NewProgressTo(io.Discard, false, "e2e", Ticks(o))
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	// The bar moves through the whole run, the adapter loads and the
	// disaggregated run after the replay included, and ends at its total.
	if got, want := o.Progress.Added(), Ticks(o); got != want {
		t.Fatalf("progress reached %d of %d ticks", got, want)
	}
	var buf strings.Builder
	if err := res.Report.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal([]byte(buf.String()), &out); err != nil {
		t.Fatal(err)
	}
	rows := map[string]map[string]any{}
	for _, r := range out.Results {
		key := r["name"].(string)
		if m, ok := r["mode"].(string); ok {
			key += "/" + m
		}
		rows[key] = r
	}
	for _, mode := range []string{"recompute", "local", "pool"} {
		r := rows["e2e/"+mode]
		// Two rounds, pooled.
		if r == nil || r["requests"].(float64) != 24 || r["failed"].(float64) != 0 || r["wrong_kv"].(float64) != 0 {
			t.Fatalf("%s row: %v", mode, r)
		}
		for _, k := range []string{"ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s"} {
			if r[k].(float64) <= 0 {
				t.Errorf("%s %s = %v", mode, k, r[k])
			}
		}
	}
	if s := rows["e2e/recompute"]["saved_tokens"].(float64); s != 0 {
		t.Errorf("recompute saved %v tokens", s)
	}
	// Block 0 is shared by all: the engines' own caches hit it.
	if s := rows["e2e/local"]["hit_hbm_tokens"].(float64); s <= 0 {
		t.Errorf("local mode hit nothing")
	}
	pool := rows["e2e/pool"]
	if pool["hit_dram_tokens"].(float64) <= 0 || pool["saved_tokens"].(float64) <= rows["e2e/local"]["saved_tokens"].(float64) {
		t.Errorf("the pool added no hits: %v", pool)
	}
	if pool["skipped_load_tokens"] != 0.0 {
		t.Errorf("loads skipped with LoadAlways: %v", pool)
	}
	if rr, _ := pool["round_ttft_vs_baseline"].([]any); len(rr) != 2 || pool["rounds"].(float64) != 2 {
		t.Errorf("pool row rounds: %v", pool)
	}
	if pool["baseline"] != "local" || pool["ratio"].(float64) <= 0 {
		t.Errorf("pool row baseline: %v", pool)
	}
	if l := rows["adapter_load"]; l == nil || l["gbps"].(float64) <= 0 || l["baseline_gbps"].(float64) <= 0 || l["block_bytes"].(float64) != 655360 {
		t.Errorf("adapter_load row: %v", l)
	}
	if d := rows["disagg"]; d == nil || d["hidden_frac"].(float64) < 0 || d["hidden_frac"].(float64) > 1 {
		t.Errorf("disagg row: %v", d)
	}
}

func TestE2ETimeScale(t *testing.T) {
	for _, c := range []struct {
		name                        string
		o                           Options
		work, wall                  float64
		wantScale, wantOffered, tol float64
	}{
		{"load", Options{Engines: 2, Scale: 100, Load: 0.7}, 50, 10, 0.28, 0.7, 1e-9},
		{"compression", Options{Engines: 2, Scale: 100, Compression: 40}, 50, 10, 0.4, 1, 1e-9},
		{"neither: compression 40", Options{Engines: 4, Scale: 10}, 50, 10, 4, 5, 1e-9},
		{"time scale wins", Options{Engines: 2, Scale: 100, Load: 0.7, TimeScale: 0.1}, 50, 10, 0.1, 0.25, 1e-9},
		{"compression wins over load", Options{Engines: 2, Scale: 100, Load: 0.7, Compression: 20}, 50, 10, 0.2, 0.5, 1e-9},
		{"no span", Options{Engines: 2, Scale: 1, Load: 0.7}, 50, 0, 40, 0, 1e-9},
	} {
		o := c.o
		o.setTimeScale(c.work, c.wall)
		if math.Abs(o.TimeScale-c.wantScale) > c.tol || math.Abs(o.offered-c.wantOffered) > c.tol {
			t.Errorf("%s: time scale %v, offered load %v; want %v, %v", c.name, o.TimeScale, o.offered, c.wantScale, c.wantOffered)
		}
	}
}
