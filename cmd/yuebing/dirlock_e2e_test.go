package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
)

// TestServeRestartRightAfterKill9: a node started on the data directory of
// one still running waits for it; killed with SIGKILL meanwhile, the old
// node lets the directory go and the new one comes up (it waits for the
// dead node's lock instead of failing on pebble's) and serves every block
// acknowledged before the kill. The same holds for a node started at once
// after a kill -9, without waiting for the killed one to be gone.
func TestServeRestartRightAfterKill9(t *testing.T) {
	dir := t.TempDir()
	lockPath := filepath.Join(dir, "yuebing.lock")
	// Blocks larger than the DRAM tier go to SSD, acknowledged once durable.
	n := serve(t, dir, "--dram-capacity", "1MiB")
	c := n.client(t, "")
	tokens := make([]uint32, 16*8)
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	keys, _ := block.ChainKeys("acme/m", 16, tokens)
	for i, k := range keys {
		if res, err := c.Put(t.Context(), "acme/m", k, testData(300+i, 2<<20)); err != nil || res.Tier != "ssd" {
			t.Fatalf("Put %d: %+v, %v", i, res, err)
		}
	}
	check := func(n *node) {
		t.Helper()
		c := n.client(t, "")
		for i, k := range keys {
			data, _, err := c.Get(t.Context(), k, client.GetOptions{})
			if err != nil || !bytes.Equal(data, testData(300+i, 2<<20)) {
				t.Fatalf("after kill -9, block %d: %v", i, err)
			}
		}
		b, err := os.ReadFile(lockPath)
		if err != nil || !strings.HasPrefix(string(b), "pid "+strconv.Itoa(n.cmd.Process.Pid)+"\n") {
			t.Fatalf("lock file %q (%v), want pid %d", b, err, n.cmd.Process.Pid)
		}
	}

	// Kill the old node once the new one has the lock file open: it is
	// then waiting for the lock.
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if len(openers(lockPath)) >= 2 {
				break
			}
		}
		n.cmd.Process.Signal(syscall.SIGKILL)
	}()
	n2 := serve(t, dir, "--dram-capacity", "1MiB")
	<-killed
	check(n2)

	if err := n2.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	n3 := serve(t, dir, "--dram-capacity", "1MiB")
	check(n3)
	n3.stop(t, syscall.SIGTERM)
}

// openers returns the pids of the processes that have path open.
func openers(path string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	seen := map[int]bool{}
	for _, fd := range procs {
		if target, err := os.Readlink(fd); err == nil && target == path {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			if !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestServeRefusesSecondProcess: a second node on a live node's data
// directory gives up after --data-dir-lock-wait, naming the holder's pid
// and command line; the first node is unaffected and, once it has exited,
// the directory is free.
func TestServeRefusesSecondProcess(t *testing.T) {
	dir := t.TempDir()
	n := serve(t, dir)
	args := []string{"serve", "--data-dir", dir, "--http-listen", "127.0.0.1:0", "--resp-listen", "",
		"--transfer-listen", "", "--dram-capacity", "64MiB", "--ssd-capacity", "256MiB", "--data-dir-lock-wait", "300ms"}
	_, stderr, code := run(t, nil, args...)
	if code == 0 {
		t.Fatal("a second node started on a data directory in use")
	}
	for _, want := range []string{"pid " + strconv.Itoa(n.cmd.Process.Pid), binary + " serve --http-listen", "--data-dir-lock-wait", "waited 300ms"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	resp, err := http.Get(n.url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the first node after the refused start: %v %v", resp, err)
	}
	resp.Body.Close()
	n.stop(t, syscall.SIGTERM)
	n = serve(t, dir)
	n.stop(t, syscall.SIGTERM)
}
