package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// debianPython is the interpreter the Python package is tested with:
// Debian's, which CI installs; a python3 earlier on PATH may be another.
const debianPython = "/usr/bin/python3"

// TestPython runs the Python package's suite (python/tests) against a real
// `yuebing serve`, once over shared memory and once over the socket.
func TestPython(t *testing.T) {
	if _, err := os.Stat(debianPython); err != nil {
		t.Skipf("%s is absent: the Python client's tests need it (apt-get install python3)", debianPython)
	}
	n := serve(t, t.TempDir(), "--dram-capacity", "256MiB", "--ssd-capacity", "512MiB")
	// A second node with bearer tokens, for the tests of authentication
	// and tenants.
	adir := t.TempDir()
	tokens := filepath.Join(adir, "tokens.yaml")
	const alpha, beta = "alpha-python-token-0001", "beta-python-token-00002"
	if err := os.WriteFile(tokens, []byte(alpha+": {tenant: alpha, role: tenant}\n"+beta+": {tenant: beta, role: tenant}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	an := serve(t, filepath.Join(adir, "data"), "--auth-tokens-file", tokens)
	dir, err := filepath.Abs("../../python/tests")
	if err != nil {
		t.Fatal(err)
	}
	touchPython(t, filepath.Dir(dir))
	keys := "100"
	if testing.Short() {
		keys = "20"
	}
	for _, mode := range []struct{ name, shm string }{{"shm", "1"}, {"socket", "0"}} {
		t.Run(mode.name, func(t *testing.T) {
			start := time.Now()
			cmd := exec.CommandContext(t.Context(), debianPython, "-m", "unittest", "discover", "-v", "-s", dir, "-t", dir)
			cmd.Dir = dir
			cmd.Env = append(envWithout("YUEBING_"), "YUEBING_URL="+n.url, "YUEBING_SHM="+mode.shm,
				"YUEBING_STRESS_KEYS="+keys, "PYTHONDONTWRITEBYTECODE=1",
				"YUEBING_AUTH_URL="+an.url, "YUEBING_TEST_TOKEN_ALPHA="+alpha, "YUEBING_TEST_TOKEN_BETA="+beta)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("python suite (%s): %v\n%s", mode.name, err, out)
			}
			// unittest reports skips as OK: a suite that skipped for want
			// of the server would prove nothing.
			if strings.Contains(string(out), "skipped 'YUEBING_URL") || !strings.Contains(string(out), "\nOK") {
				t.Fatalf("python suite (%s) did not run:\n%s", mode.name, out)
			}
			t.Logf("python suite over %s: %s", mode.name, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestBenchPython runs `yuebing bench python` on one small size: one JSON
// object with a row per op and path, each against the raw socket of the
// same run.
func TestBenchPython(t *testing.T) {
	if _, err := os.Stat(debianPython); err != nil {
		t.Skipf("%s is absent: the Python benchmark needs it (apt-get install python3)", debianPython)
	}
	if testing.Short() {
		t.Skip("-short: the Python benchmark's smoke run is left to the full run")
	}
	touchPython(t, "../../python")
	stdout, stderr, code := run(t, nil, "bench", "python", "--quick", "--sizes", "64KiB", "--json",
		"--dram-capacity", "128MiB", "--python-dir", "../../python")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var out struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	names := map[string]bool{}
	for _, r := range out.Results {
		names[r["name"].(string)] = true
		for _, f := range []string{"gbps", "baseline_gbps", "ratio"} {
			if v, ok := r[f].(float64); !ok || v <= 0 {
				t.Errorf("%s: %s = %v", r["name"], f, r[f])
			}
		}
		if r["baseline"] == "" {
			t.Errorf("%s: no baseline", r["name"])
		}
	}
	for _, want := range []string{"get_into/64KiB/shm", "get_into/64KiB/socket", "put_from/64KiB/shm", "put_from/64KiB/socket"} {
		if !names[want] {
			t.Errorf("no row %s in %v", want, names)
		}
	}
	if _, _, code := run(t, nil, "bench", "python", "--python-dir", "/nonexistent"); code == 0 {
		t.Error("a missing package directory was accepted")
	}
}

// touchPython reads every file of the Python package and its tests, so
// that go test's cache counts them as inputs: a changed .py file runs the
// suite again.
func touchPython(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "__pycache__" {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".py") || strings.HasSuffix(path, ".toml")) {
			_, err = os.ReadFile(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
