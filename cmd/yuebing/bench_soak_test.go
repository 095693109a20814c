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

	"github.com/minio/minio-go/v7"

	"github.com/yuebing/yuebing/tier/s3/versitygw"
)

// soakRun runs `yuebing bench soak --json` with args, without the caller's
// YUEBING_ variables and with env added, and returns its soak row and the
// number of soak_window rows; a soak that fails or prints no soak row fails
// the test with its output.
func soakRun(t *testing.T, env []string, args ...string) (row map[string]any, windows int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"bench", "soak", "--json"}, args...)...)
	cmd.Env = append(envWithout("YUEBING_"), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("bench soak %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr)
	}
	var rep struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("bench soak --json: %v\n%s", err, out)
	}
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
	return row, windows
}

// soakNum reads a number of a soak row; a missing one fails the test.
func soakNum(t *testing.T, row map[string]any) func(string) float64 {
	return func(k string) float64 {
		t.Helper()
		v, ok := row[k].(float64)
		if !ok {
			t.Fatalf("soak row has no %s: %v", k, row)
		}
		return v
	}
}

// soakCheck is one named expectation of a soak row.
type soakCheck struct {
	name string
	ok   bool
}

// checkSoak reports every check that fails, with the row.
func checkSoak(t *testing.T, row map[string]any, checks []soakCheck) {
	t.Helper()
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: %v", c.name, row)
		}
	}
}

// soakSmall are the tiers and values of the tests' soaks: small, so that
// a run of seconds evicts from DRAM and SSD.
var soakSmall = []string{"--dram-capacity", "16MiB", "--ssd-capacity", "64MiB", "--max-inflight-bytes", "64MiB",
	"--max-value", "128KiB"}

// TestBenchSoak runs the soak briefly on one real node with one kill -9:
// load of every front end past capacity, a durable write on disk at the
// kill read back after the restart, no corrupt read, no lost write, memory
// within its bound. Beside it two engine simulators publish KV events to a
// router that OpenAI requests go through; one engine is killed (at 5 s)
// and must serve through the router again, no answer may be a 5xx other
// than a 503 during its outage, and the router must not exit.
func TestBenchSoak(t *testing.T) {
	dir := t.TempDir()
	row, windows := soakRun(t, nil, append(soakSmall, "--duration", "20s", "--kill-every", "10s",
		"--durable-every", "2s", "--window", "5s",
		"--dir", filepath.Join(dir, "soak"), "--plot", filepath.Join(dir, "soak.png"))...)
	status, _ := row["router_status"].(map[string]any)
	ok200, _ := status["200"].(float64)
	num := soakNum(t, row)
	checkSoak(t, row, []soakCheck{
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
		{"router answers 200", ok200 > 0},
		{"one engine kill", num("engine_kills") == 1},
		{"the killed engine served through the router again", num("engine_recovered") == 1},
		{"no 5xx other than 503", num("router_5xx_not_503") == 0},
		{"no 503 with every engine up", num("router_503_outside_outage") == 0},
		{"no cut or malformed answers with every engine up", num("router_bad_answers") == 0},
		{"the router did not exit", row["router_exited"] == false},
		{"prefix hits", num("router_prefix_tokens") > 0},
	})
}

// TestBenchSoakS3 runs the soak briefly as --s3 does by default: the
// three-node cluster, its nodes killed every 10 s, two engines behind a
// router, and every node with an S3 tier under its SSD on one versitygw
// bucket the soak starts, killed at 12 s for 6 s. Blocks go down to the
// bucket and are read back from it, every node's tier that sends the
// bucket a request while the server is down reports itself degraded and
// healthy after, no client request
// fails during the outage with every node up, and no read is corrupt and no
// acknowledged durable write lost across the node kills.
func TestBenchSoakS3(t *testing.T) {
	if testing.Short() {
		t.Skip("a 32 s soak of three nodes")
	}
	if versitygw.Binary() == "" {
		t.Skip(versitygw.ErrNotInstalled)
	}
	row, _ := soakRun(t, nil, append(soakSmall, "--duration", "32s", "--kill-every", "10s",
		"--durable-every", "2s", "--window", "5s",
		"--s3", "--s3-segment-size", "2MiB", "--s3-kill-at", "12s", "--s3-down-for", "5s",
		"--dir", filepath.Join(t.TempDir(), "soak"))...)
	num := soakNum(t, row)
	checkSoak(t, row, []soakCheck{
		{"three nodes", num("nodes") == 3 && row["cluster"] == true},
		{"requests > 0", num("requests") > 0},
		{"nodes killed", num("kills") >= 1},
		{"no client errors during the outage", num("s3_outage_errors") == 0},
		{"no corrupt reads", num("corrupt_reads") == 0 && num("s3_corrupt") == 0},
		{"no lost writes", num("lost_writes") == 0},
		{"blocks demoted to S3", num("s3_demoted_blocks") > 0},
		{"reads served from S3", num("s3_hits") > 0},
		{"one S3 kill", num("s3_kills") == 1},
		// A node that sent the bucket nothing while it was down (one just
		// restarted) cannot tell; the soak names it idle instead.
		{"every node's tier that tried reported the outage", row["s3_degraded_seen"] == true && num("s3_degraded_nodes") >= 1 && num("s3_degraded_s") > 0},
		{"every tier recovered", row["s3_recovered"] == true && num("s3_recoveries") >= 1},
		{"router requests", num("router_requests") > 0},
		{"no router faults", num("router_5xx_not_503") == 0 && num("router_bad_answers") == 0 && row["router_exited"] == false},
		{"passed", row["passed"] == true},
	})
}

// TestBenchSoakS3External points the soak at a bucket it did not start, as
// an operator would: a versitygw this test runs, its bucket created here,
// passed as --s3-endpoint and --s3-bucket with the credentials in
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (one node, small tiers, so
// that 15 s evict into the bucket; TestBenchSoakS3 runs the cluster). The
// node's blocks must reach the bucket under its own namespace, the soak
// must pass, and the server must come out of it untouched: never killed
// (s3_kills 0, the same process still serving) and an object outside the
// namespace still there.
func TestBenchSoakS3External(t *testing.T) {
	if testing.Short() {
		t.Skip("a 15 s soak")
	}
	if versitygw.Binary() == "" {
		t.Skip(versitygw.ErrNotInstalled)
	}
	ctx := t.Context()
	dir := t.TempDir()
	gw, err := versitygw.Start(ctx, versitygw.Options{Dir: filepath.Join(dir, "gw"), Bucket: "kv-external"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Stop)
	cl, err := gw.Client()
	if err != nil {
		t.Fatal(err)
	}
	const other = "someone-else/keep"
	if _, err := cl.PutObject(ctx, gw.Bucket, other, strings.NewReader("not the soak's"), 14, minio.PutObjectOptions{}); err != nil {
		t.Fatalf("putting %s: %v", other, err)
	}
	const ns = "soak-test/run1"
	row, _ := soakRun(t, []string{"AWS_ACCESS_KEY_ID=" + gw.AccessKey, "AWS_SECRET_ACCESS_KEY=" + gw.SecretKey},
		"--cluster=false", "--dram-capacity", "8MiB", "--ssd-capacity", "64MiB", "--max-inflight-bytes", "32MiB", "--max-value", "128KiB",
		"--duration", "15s", "--no-kill", "--engines", "0", "--no-durable", "--window", "5s",
		"--s3-endpoint", gw.Endpoint, "--s3-bucket", gw.Bucket, "--s3-namespace", ns, "--s3-segment-size", "1MiB",
		"--dir", filepath.Join(dir, "soak"))
	num := soakNum(t, row)
	checkSoak(t, row, []soakCheck{
		{"one node", num("nodes") == 1},
		{"blocks demoted to S3", num("s3_demoted_blocks") > 0},
		{"the external server never killed", num("s3_kills") == 0},
		{"no corrupt reads", num("corrupt_reads") == 0 && num("s3_corrupt") == 0},
		{"passed", row["passed"] == true},
	})

	// The bucket, listed by the same server process the soak was given:
	// segment objects under each node's namespace, nothing of the soak's
	// outside it, and the other object still there.
	segs := map[string]int{}
	for obj := range cl.ListObjects(ctx, gw.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("listing the bucket after the soak (the server should still be up): %v", obj.Err)
		}
		node, rest, ok := strings.Cut(strings.TrimPrefix(obj.Key, ns+"/"), "/")
		switch {
		case obj.Key == other:
			segs[other]++
		case strings.HasPrefix(obj.Key, ns+"/") && ok && strings.HasPrefix(rest, "seg/") && obj.Size > 0:
			segs[node]++
		default:
			t.Errorf("unexpected object %q (%d bytes)", obj.Key, obj.Size)
		}
	}
	if segs[other] != 1 {
		t.Errorf("%s gone from the bucket: %v", other, segs)
	}
	if segs["a"] == 0 {
		t.Errorf("no segment object under %s/a/seg/: %v", ns, segs)
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
