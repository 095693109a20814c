package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/tier/s3/versitygw"
)

// TestBenchSoak runs the soak briefly on one real node with one kill -9:
// load of every front end past capacity, a durable write on disk at the
// kill read back after the restart, no corrupt read, no lost write, memory
// within its bound. Beside it two engine simulators publish KV events to a
// router that OpenAI requests go through; one engine is killed (at 5 s)
// and must serve through the router again, no answer may be a 5xx other
// than a 503 during its outage, and the router must not exit.
func TestBenchSoak(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "bench", "soak", "--duration", "20s", "--kill-every", "10s",
		"--dram-capacity", "16MiB", "--ssd-capacity", "64MiB", "--max-inflight-bytes", "64MiB",
		"--max-value", "128KiB", "--durable-every", "2s", "--window", "5s",
		"--dir", filepath.Join(dir, "soak"), "--json", "--plot", filepath.Join(dir, "soak.png"))
	cmd.Env = envWithout("YUEBING_")
	out, err := cmd.Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	if err != nil {
		t.Fatalf("bench soak: %v\n%s\n%s", err, out, stderr)
	}
	var rep struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("bench soak --json: %v\n%s", err, out)
	}
	var row map[string]any
	windows := 0
	for _, r := range rep.Results {
		switch r["name"] {
		case "soak":
			row = r
		case "soak_window":
			windows++
		}
	}
	if row == nil {
		t.Fatalf("no soak row: %s", out)
	}
	num := func(k string) float64 {
		t.Helper()
		v, ok := row[k].(float64)
		if !ok {
			t.Fatalf("soak row has no %s: %v", k, row)
		}
		return v
	}
	status, _ := row["router_status"].(map[string]any)
	if _, ok := status["200"].(float64); !ok {
		t.Fatalf("no 200 in router_status: %v", row)
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"requests > 0", num("requests") > 0},
		{"hits > 0", num("hits") > 0},
		{"one kill", num("kills") == 1},
		{"no corrupt reads", num("corrupt_reads") == 0},
		{"no lost writes", num("lost_writes") == 0},
		{"a durable write checked after the restart", num("durable_checked") >= 1},
		{"RSS sampled", num("max_rss_bytes") > 0},
		{"RSS within bound", num("max_rss_bytes") <= num("rss_bound_bytes") && row["rss_exceeded"] == false},
		{"passed", row["passed"] == true},
		{"latency windows", windows >= 3},
		{"router requests", num("router_requests") > 0},
		{"router answers 200", status["200"].(float64) > 0},
		{"one engine kill", num("engine_kills") == 1},
		{"the killed engine served through the router again", num("engine_recovered") == 1},
		{"no 5xx other than 503", num("router_5xx_not_503") == 0},
		{"no 503 with every engine up", num("router_503_outside_outage") == 0},
		{"no cut or malformed answers with every engine up", num("router_bad_answers") == 0},
		{"the router did not exit", row["router_exited"] == false},
		{"prefix hits", num("router_prefix_tokens") > 0},
	} {
		if !c.ok {
			t.Errorf("%s: %v", c.name, row)
		}
	}
}

// TestBenchSoakS3 runs the soak briefly on one node with an S3 tier under
// its SSD, on a versitygw the soak starts, killed at 8 s for 6 s: blocks
// go down to the bucket and are read back from it, the tier reports
// itself degraded while the server is down and healthy after, and no
// client request fails (no node is killed, so any error is the tier's).
func TestBenchSoakS3(t *testing.T) {
	if testing.Short() {
		t.Skip("a 24 s soak")
	}
	if versitygw.Binary() == "" {
		t.Skip(versitygw.ErrNotInstalled)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "bench", "soak", "--duration", "24s", "--no-kill", "--engines", "0",
		"--dram-capacity", "16MiB", "--ssd-capacity", "64MiB", "--max-inflight-bytes", "64MiB",
		"--max-value", "128KiB", "--no-durable", "--window", "4s",
		"--s3", "--s3-segment-size", "2MiB", "--s3-kill-at", "8s", "--s3-down-for", "6s",
		"--dir", filepath.Join(dir, "soak"), "--json")
	cmd.Env = envWithout("YUEBING_")
	out, err := cmd.Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	if err != nil {
		t.Fatalf("bench soak --s3: %v\n%s\n%s", err, out, stderr)
	}
	var rep struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("bench soak --json: %v\n%s", err, out)
	}
	var row map[string]any
	for _, r := range rep.Results {
		if r["name"] == "soak" {
			row = r
		}
	}
	if row == nil {
		t.Fatalf("no soak row: %s", out)
	}
	num := func(k string) float64 {
		t.Helper()
		v, ok := row[k].(float64)
		if !ok {
			t.Fatalf("soak row has no %s: %v", k, row)
		}
		return v
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"requests > 0", num("requests") > 0},
		{"no client errors", num("error_total") == 0 && num("s3_outage_errors") == 0},
		{"no corrupt reads", num("corrupt_reads") == 0 && num("s3_corrupt") == 0},
		{"blocks demoted to S3", num("s3_demoted_blocks") > 0},
		{"reads served from S3", num("s3_hits") > 0},
		{"one S3 kill", num("s3_kills") == 1},
		{"the tier reported the outage", row["s3_degraded_seen"] == true && num("s3_degraded_s") > 0},
		{"the tier recovered", row["s3_recovered"] == true && num("s3_recoveries") >= 1},
		{"passed", row["passed"] == true},
	} {
		if !c.ok {
			t.Errorf("%s: %v", c.name, row)
		}
	}
}

// TestBenchSoakBadFlags: invalid settings are usage errors naming what is
// wrong, before any node starts.
func TestBenchSoakBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "0s"}, "--duration"},
		{[]string{"--kill-every", "0s"}, "--kill-every"},
		{[]string{"--durable-every", "-1s"}, "--durable-every"},
		{[]string{"--dram-capacity", "lots"}, "--dram-capacity"},
		{[]string{"--max-value", "1x"}, "--max-value"},
		{[]string{"--dram-capacity", "1MiB"}, "capacities"},
		{[]string{"--max-value", "16MiB"}, "value sizes"},
		{[]string{"--ssd-capacity", "64MiB"}, "durable block"},
		{[]string{"--workers", "65"}, "workers"},
		{[]string{"--overcommit", "-1"}, "overcommit"},
		{[]string{"--engines", "-1"}, "--engines"},
		{[]string{"--engine-kill-every", "-1s"}, "--engine-kill-every"},
		{[]string{"--router-workers", "65"}, "router workers"},
		{[]string{"--engines", "17"}, "engines 17"},
		{[]string{"--s3-capacity", "1GiB"}, "--s3-*: want --s3"},
		{[]string{"--s3", "--s3-capacity", "1MiB"}, "s3: capacity"},
		{[]string{"--s3-endpoint", "127.0.0.1:9000"}, "--s3-endpoint and --s3-bucket go together"},
		{[]string{"--s3", "--s3-kill-at", "20m"}, "within the duration"},
	} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"bench", "soak", "--binary", binary}, c.args...))
		var ue usageError
		if err := root.Execute(); !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want a usage error naming %q", c.args, err, c.want)
		}
	}
}
