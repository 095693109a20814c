package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoInterrupt runs `yuebing demo --engines 2` as a user does: the
// banner's curl answers a chat through the router (where curl is
// installed), and SIGINT (Ctrl-C) ends the process with status 0, its
// ports closed and its temporary data directory removed. The demo itself
// is tested in package demo.
func TestDemoInterrupt(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command(binary, "demo", "--engines", "2")
	cmd.Env = append(envWithout("YUEBING_"), "TMPDIR="+tmp)
	stderr := newSyncBuffer()
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	var router, dataDir, curl string
	var hosts []string
	timeout := time.After(60 * time.Second)
	for banner := true; banner; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("yuebing demo ended before its banner\n%s", stderr)
			}
			t.Log(l)
			f := strings.Fields(l)
			switch {
			case l == "Ctrl-C stops everything.":
				banner = false
			case len(f) >= 2 && f[0] == "router":
				router = f[1]
				hosts = append(hosts, f[1])
			case len(f) >= 3 && f[0] == "engine":
				hosts = append(hosts, f[2])
			case len(f) >= 2 && f[0] == "data":
				dataDir = f[1]
			case len(f) >= 1 && f[0] == "curl":
				curl = strings.TrimSpace(l)
			}
		case <-timeout:
			t.Fatalf("no banner from yuebing demo in 60 s\n%s", stderr)
		}
	}
	if router == "" || len(hosts) != 3 || !strings.HasPrefix(dataDir, tmp) || curl == "" {
		t.Fatalf("banner: router %q, addresses %q, data %q, curl %q", router, hosts, dataDir, curl)
	}
	if _, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command("sh", "-c", curl+" -sS --fail-with-body").CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"chat.completion"`) {
			t.Errorf("the banner's curl: %v\n%s", err, out)
		}
	} else {
		t.Log("curl is not installed: the banner's command is not run")
	}

	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil {
			t.Fatalf("yuebing demo exited with %v on SIGINT\n%s", err, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("yuebing demo still runs 30 s after SIGINT\n%s", stderr)
	}
	for _, u := range hosts {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := net.DialTimeout("tcp", pu.Host, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after yuebing demo exited", u)
		}
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary data directory %s is still there: %v", dataDir, err)
	}
}
