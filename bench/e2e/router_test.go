package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A small routed replay: five conversations of three turns through the
// router in front of four engine simulators, under each routing. Five
// conversations on four engines make round robin send each turn to another
// engine than the turn before; the conductor follows the engines' KV events
// and sends it where the conversation's history is cached.
func TestRunE2ERouter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs engine simulators and the router on loopback listeners; skipped with -short")
	}
	var lines []string
	for turn := range 3 {
		for c := 1; c <= 5; c++ {
			ids := []string{"0"} // a system prompt all share
			for i := 0; i <= turn+1; i++ {
				ids = append(ids, fmt.Sprint(c*100+i))
			}
			lines = append(lines, fmt.Sprintf(`{"timestamp": %d, "input_length": %d, "output_length": 3, "hash_ids": [%s]}`,
				(turn*8+c)*1000, 512*(turn+3), strings.Join(ids, ", ")))
		}
	}
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(trace, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	res, err := RunRouter(t.Context(), RouterOptions{
		Options: Options{Trace: trace, Requests: 15, Scale: 10, TimeScale: 0.01, Quick: true},
		TTFTSLO: 10e9, Log: &log,
	})
	if err != nil {
		t.Fatal(err)
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
		if r["name"] == "e2e" {
			rows[r["routing"].(string)] = r
		}
	}
	for _, routing := range []string{RoutingConductor, RoutingRoundRobin, RoutingLeastLoaded} {
		r := rows[routing]
		if r == nil {
			t.Fatalf("no row for %s in %s", routing, buf.String())
		}
		if r["offered"].(float64) != 15 || r["requests"].(float64) != 15 || r["rejected"].(float64) != 0 || r["failed"].(float64) != 0 {
			t.Errorf("%s: offered %v, served %v, rejected %v, failed %v; want all 15 served", routing, r["offered"], r["requests"], r["rejected"], r["failed"])
		}
		mean, p50, p90 := r["ttft_mean_s"].(float64), r["ttft_p50_s"].(float64), r["ttft_p90_s"].(float64)
		if !(mean > 0 && p50 > 0 && p90 >= p50) {
			t.Errorf("%s: TTFT mean %v, p50 %v, p90 %v", routing, mean, p50, p90)
		}
		if c := r["effective_capacity"].(float64); c < 0 || c > 1 {
			t.Errorf("%s: effective capacity %v", routing, c)
		}
		if e, ok := r["predicted_ttft_p50_error"].(float64); !ok || e < 0 || math.IsNaN(e) {
			t.Errorf("%s: predicted TTFT error %v", routing, r["predicted_ttft_p50_error"])
		}
		if r["prompt_tokens"].(float64) != r["hit_hbm_tokens"].(float64)+r["computed_tokens"].(float64) {
			t.Errorf("%s: prompt tokens %v are not hits %v plus computed %v", routing, r["prompt_tokens"], r["hit_hbm_tokens"], r["computed_tokens"])
		}
		if !strings.Contains(log.String(), routing) {
			t.Errorf("no progress line for %s in %q", routing, log.String())
		}
	}
	c, rr := rows[RoutingConductor], rows[RoutingRoundRobin]
	t.Logf("hit tokens: conductor %v, round robin %v, least loaded %v", c["hit_hbm_tokens"], rr["hit_hbm_tokens"], rows[RoutingLeastLoaded]["hit_hbm_tokens"])
	if c["hit_hbm_tokens"].(float64) <= rr["hit_hbm_tokens"].(float64) {
		t.Errorf("conductor hit %v tokens, round robin %v: following the events should find the conversations' history", c["hit_hbm_tokens"], rr["hit_hbm_tokens"])
	}
	if c["baseline"] != RoutingLeastLoaded || c["ratio"].(float64) <= 0 {
		t.Errorf("conductor row baseline: %v", c)
	}
	png := filepath.Join(t.TempDir(), "router.png")
	if err := PlotRouter(res, png); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(png); err != nil || st.Size() < 1000 {
		t.Fatalf("plot: %v, %v", st, err)
	}
}
