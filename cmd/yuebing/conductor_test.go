package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConductorBinary builds yuebing, runs `yuebing conductor` on a free
// port, schedules a request through it and stops it with SIGTERM.
func TestConductorBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "yuebing")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "conductor", "--listen", "127.0.0.1:0", "--rejection", "early")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listen address: %v", err)
	}
	url := strings.TrimSpace(strings.TrimPrefix(line, "conductor listening on "))
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line %q does not name the address", line)
	}
	go io.Copy(io.Discard, stderr)

	post := func(path, body string, want int) string {
		t.Helper()
		resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("POST %s: %d %s, want %d", path, resp.StatusCode, b, want)
		}
		return string(b)
	}
	post("/v1/conductor/instances", `{"id":"p0","role":"prefill"}`, 201)
	post("/v1/conductor/instances", `{"id":"d0","role":"decode"}`, 201)
	body := post("/v1/conductor/schedule", `{"namespace":"acme/llama","tokens":[1,2,3,4]}`, 200)
	if !strings.Contains(body, `"prefill":{"id":"p0"}`) || !strings.Contains(body, `"decode":{"id":"d0"}`) {
		t.Fatalf("schedule response %s, want p0 and d0", body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("conductor exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("conductor did not stop on SIGTERM")
	}
}

func TestConductorAndSchedUsage(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(bad, []byte("input_len,prefix_len,seconds\n1,2,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"conductor", "--policy", "fastest"}, "--policy"},
		{[]string{"conductor", "--rejection", "maybe"}, "--rejection"},
		{[]string{"conductor", "--block-size", "3"}, "--block-size"},
		{[]string{"conductor", "--threshold", "0.5"}, "--threshold"},
		{[]string{"conductor", "--prefill-profile", bad}, "--prefill-profile"},
		// Off loopback without tokens: the conductor, and the router.
		{[]string{"conductor", "--listen", "0.0.0.0:0"}, "--insecure"},
		{[]string{"conductor", "--listen", "0.0.0.0:0", "--model", "m", "--namespace", "acme/m", "--engine", "id=e0,url=http://127.0.0.1:1"}, "--auth-tokens-file"},
		{[]string{"conductor", "--auth-tokens-file", filepath.Join(t.TempDir(), "missing.yaml")}, "--auth-tokens-file"},
		{[]string{"bench", "sched"}, "--trace"},
		{[]string{"bench", "sched", "--trace", "x", "--prefill", "0"}, "--prefill"},
		{[]string{"bench", "sched", "--trace", "x", "--cache", "100"}, "--cache"},
		{[]string{"bench", "sched", "--trace", "x", "--policy", "nope"}, "--policy"},
		{[]string{"bench", "sched", "--trace", "x", "--rejection", "nope"}, "--rejection"},
		{[]string{"bench", "sched", "--trace", "x", "--speed", "0"}, "--speed"},
	} {
		cmd := newRootCmd()
		cmd.SetArgs(tc.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		err := cmd.Execute()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%v: got %v, want a usage error naming %s", tc.args, err, tc.flag)
		}
	}
}
