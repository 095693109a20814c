package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchSchedJSON runs the default suite on a small generated trace:
// exactly one JSON object with one row per combination, carrying the
// documented fields (docs/benchmarks.md), and a plot.
func TestBenchSchedJSON(t *testing.T) {
	dir := t.TempDir()
	var trace strings.Builder
	for i := range 200 {
		// Sessions of a shared 2-block system prompt and a private tail.
		fmt.Fprintf(&trace, `{"timestamp": %d, "input_length": 2048, "output_length": 50, "hash_ids": [0, 1, %d, %d]}`+"\n", i*200, 1000+2*i, 1001+2*i)
	}
	path := filepath.Join(dir, "tiny_trace.jsonl")
	if err := os.WriteFile(path, []byte(trace.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(dir, "sched.png")
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"bench", "sched", "--trace", path, "--json", "--plot", png})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []map[string]any `json:"results"`
	}
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value on stdout")
	}
	names := map[string]bool{}
	for _, r := range rep.Results {
		names[r["name"].(string)] = true
		for _, f := range []string{"policy", "rejection", "avg_ttft_s", "p90_ttft_s", "p90_tbt_ms", "effective_capacity", "hit_rate", "rejected", "prefill_load_std", "decode_load_std"} {
			if _, ok := r[f]; !ok {
				t.Errorf("row %v lacks %s", r["name"], f)
			}
		}
	}
	for _, want := range []string{"random/none", "load/none", "cache-local/none", "cache-global/none", "overload/cache-global/none", "overload/cache-global/early", "overload/cache-global/predicted"} {
		if !names[want] {
			t.Errorf("no row %s in %v", want, names)
		}
	}
	if st, err := os.Stat(png); err != nil || st.Size() == 0 {
		t.Errorf("plot: %v", err)
	}
}
