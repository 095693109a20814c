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
// `yuebing serve`, once over shared memory and once over the socket. The
// tiny model's 200 prompts run over shared memory; the socket run serves
// 40 of them, which is what differs there (the data path), at a fifth of
// the time.
func TestPython(t *testing.T) {
	if _, err := os.Stat(debianPython); err != nil {
		t.Skipf("%s is absent: the Python client's tests need it (apt-get install python3)", debianPython)
	}
	logTorch(t)
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
	for _, mode := range []struct{ name, shm, prompts string }{{"shm", "1", "200"}, {"socket", "0", "40"}} {
		t.Run(mode.name, func(t *testing.T) {
			start := time.Now()
			cmd := exec.CommandContext(t.Context(), debianPython, "-m", "unittest", "discover", "-v", "-s", dir, "-t", dir)
			cmd.Dir = dir
			cmd.Env = append(pythonEnv(), "YUEBING_URL="+n.url, "YUEBING_SHM="+mode.shm,
				"YUEBING_STRESS_KEYS="+keys, "YUEBING_TINY_PROMPTS="+mode.prompts, "YUEBING_BIN="+binary,
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

// pythonEnv is the environment the Python suites run in: no YUEBING_
// variable of the caller's, no bytecode written into the tree, and one
// OpenMP thread for torch (on a CPU shared with other jobs, its spinning
// threads made the tiny model's prefill 13x slower than one thread).
func pythonEnv() []string {
	return append(envWithout("YUEBING_"), "PYTHONDONTWRITEBYTECODE=1", "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1")
}

// logTorch says, in the test's log, when torch is not importable: the
// tiny model's suites then skip (apt-get install python3-torch).
func logTorch(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(debianPython, "-c", "import torch").CombinedOutput(); err != nil {
		t.Logf("torch is not importable, so the tiny model's tests skip (apt-get install python3-torch python3-numpy): %s",
			strings.TrimSpace(lastLine(string(out))))
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// TestPythonCluster runs the tiny model's suite over a two-node cluster
// with an embedded etcd: KV blocks are saved through node a and loaded
// through node b (YUEBING_PEER_URL), whose reads fetch them from a.
func TestPythonCluster(t *testing.T) {
	if _, err := os.Stat(debianPython); err != nil {
		t.Skipf("%s is absent: the Python client's tests need it (apt-get install python3)", debianPython)
	}
	if out, err := exec.Command(debianPython, "-c", "import torch").CombinedOutput(); err != nil {
		t.Skipf("torch is not importable: the tiny model needs it (apt-get install python3-torch python3-numpy): %s",
			lastLine(string(out)))
	}
	root := t.TempDir()
	sizes := []string{"--dram-capacity", "256MiB", "--ssd-capacity", "512MiB"}
	a := serveCluster(t, "a", filepath.Join(root, "a"), append([]string{"--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0"}, sizes...)...)
	b := serveCluster(t, "b", filepath.Join(root, "b"), append([]string{"--etcd", a.banner["etcd"]}, sizes...)...)
	waitCluster(t, a, b)
	dir, err := filepath.Abs("../../python/tests")
	if err != nil {
		t.Fatal(err)
	}
	touchPython(t, filepath.Dir(dir))
	start := time.Now()
	cmd := exec.CommandContext(t.Context(), debianPython, "-m", "unittest", "-v", "test_tiny_model")
	cmd.Dir = dir
	cmd.Env = append(pythonEnv(), "YUEBING_URL="+a.url, "YUEBING_PEER_URL="+b.url, "YUEBING_TINY_PROMPTS=200")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tiny model over the cluster: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "skipped") || !strings.Contains(string(out), "\nOK") {
		t.Fatalf("tiny model over the cluster did not run:\n%s", out)
	}
	t.Logf("tiny model over a two-node cluster: %s", time.Since(start).Round(time.Millisecond))
}

// TestPythonInstall runs the install docs/python.md documents, `pip install
// ./python` in a fresh venv of Debian's python3, with no package index, so
// that a build needing anything from the network fails; then imports the
// installed copy from outside the tree, and checks that its version is the
// one pip recorded. pip install -e installs the tree itself.
func TestPythonInstall(t *testing.T) {
	if _, err := os.Stat(debianPython); err != nil {
		t.Skipf("%s is absent: the install test needs it (apt-get install python3 python3-venv)", debianPython)
	}
	if testing.Short() {
		t.Skip("-short: the install test is left to the full run")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	touchPython(t, filepath.Join(root, "python"))
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PIP_") && !strings.HasPrefix(kv, "PYTHON") && !strings.HasPrefix(kv, "VIRTUAL_ENV=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PIP_NO_INDEX=1", "PIP_CONFIG_FILE=/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK=1",
		"PIP_NO_CACHE_DIR=1", "PYTHONDONTWRITEBYTECODE=1")
	sh := func(t *testing.T, dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// Where `import yuebing` resolves, and whether its version is the
	// installed distribution's; run outside the tree.
	const probe = "import importlib.metadata, yuebing; " +
		"assert yuebing.__version__ == importlib.metadata.version('yuebing'), importlib.metadata.version('yuebing'); " +
		"print(yuebing.__file__)"
	for _, tc := range []struct {
		name string
		args []string
	}{{"venv", nil}, {"system-site-packages", []string{"--system-site-packages"}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			venv := filepath.Join(tmp, "venv")
			cmd := exec.CommandContext(t.Context(), debianPython, append([]string{"-m", "venv"}, append(tc.args, venv)...)...)
			cmd.Dir, cmd.Env = tmp, env
			if out, err := cmd.CombinedOutput(); err != nil {
				// Debian's python3 makes venvs with pip only where
				// python3-venv is installed; it says so through ensurepip.
				if strings.Contains(string(out), "ensurepip") {
					t.Skipf("python3-venv is absent (apt-get install python3-venv): %v\n%s", err, out)
				}
				t.Fatalf("python3 -m venv: %v\n%s", err, out)
			}
			pip, python := filepath.Join(venv, "bin", "pip"), filepath.Join(venv, "bin", "python")

			sh(t, root, pip, "install", "./python")
			// Paths compared with links resolved: the .pth of an editable
			// install holds the tree's resolved path.
			real := func(path string) string {
				t.Helper()
				r, err := filepath.EvalSymlinks(path)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			got := real(strings.TrimSpace(sh(t, tmp, python, "-c", probe)))
			if want := real(venv) + string(filepath.Separator); !strings.HasPrefix(got, want) {
				t.Fatalf("import yuebing found %s, not the copy installed under %s", got, want)
			}
			if tc.args != nil {
				return
			}
			// The mooncake drop-in comes only when named: yuebing alone
			// installs no `mooncake`, and uninstalling the drop-in removes it.
			noMooncake := func(when string) {
				t.Helper()
				cmd := exec.Command(python, "-c", "import mooncake")
				cmd.Dir, cmd.Env = tmp, env
				if out, err := cmd.CombinedOutput(); err == nil {
					t.Fatalf("%s, `import mooncake` works:\n%s", when, out)
				}
			}
			noMooncake("with yuebing alone installed")
			sh(t, root, pip, "install", "./python/mooncake-compat")
			if got := strings.TrimSpace(sh(t, tmp, python, "-c", "import mooncake, mooncake.store as s; print(mooncake.YUEBING, s.MooncakeDistributedStore.__module__)")); got != "True yuebing.mooncake" {
				t.Fatalf("the drop-in's mooncake.store: %q", got)
			}
			sh(t, root, pip, "uninstall", "-y", "yuebing-mooncake-compat")
			noMooncake("after pip uninstall yuebing-mooncake-compat")
			sh(t, root, pip, "install", "-e", "./python")
			got = real(strings.TrimSpace(sh(t, tmp, python, "-c", probe)))
			if want := real(filepath.Join(root, "python", "yuebing", "__init__.py")); got != want {
				t.Fatalf("after pip install -e, import yuebing found %s, want %s", got, want)
			}
			sh(t, root, pip, "uninstall", "-y", "yuebing")
			cmd = exec.Command(python, "-c", "import yuebing")
			cmd.Dir, cmd.Env = tmp, env
			if out, err := cmd.CombinedOutput(); err == nil {
				t.Fatalf("yuebing still imports after pip uninstall:\n%s", out)
			}
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
