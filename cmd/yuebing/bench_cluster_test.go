package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestBenchClusterProcesses runs `yuebing bench cluster` small: its GET and
// put measurements on node processes started from the binary.
func TestBenchClusterProcesses(t *testing.T) {
	trace := filepath.Join("..", "..", "traces", "conversation_trace.jsonl")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "bench", "cluster", "--trace", trace, "--requests", "60", "--nodes", "2",
		"--dram-capacity", "8MiB", "--block-bytes", "4KiB", "--get-size", "256KiB", "--get-duration", "300ms", "--samples", "2", "--json")
	cmd.Env = envWithout("YUEBING_")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("bench cluster: %v\n%s\n%s", err, out, stderr)
	}
	var rep struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("bench cluster --json: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		name, _ := r["name"].(string)
		switch name {
		case "local_get", "cross_node_get", "local_prefix_get", "cross_node_prefix_get", "put_single", "put_cluster":
			if r["processes"] != true {
				t.Errorf("%s: processes %v", name, r["processes"])
			}
			if g, ok := r["gbps"].(float64); ok && g <= 0 {
				t.Errorf("%s: %v GB/s", name, g)
			}
			seen[name] = true
		}
	}
	if len(seen) != 6 {
		t.Fatalf("rows %v in %s", seen, out)
	}
}
