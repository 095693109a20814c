package main

import (
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
	dir, err := filepath.Abs("../../python/tests")
	if err != nil {
		t.Fatal(err)
	}
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
				"YUEBING_STRESS_KEYS="+keys, "PYTHONDONTWRITEBYTECODE=1")
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
