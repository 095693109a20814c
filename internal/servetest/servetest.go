// Package servetest builds the yuebing binary once per test process and runs
// it as a child process (`yuebing serve`, `yuebing engine-sim`), so tests of
// other packages talk to the real server over real sockets.
package servetest

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var build struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// Binary returns the path of a yuebing binary built from this module, built
// on the first call. $YUEBING_TEST_BINARY names a binary built beforehand
// instead, for test binaries run on a machine without the go tool (a GPU
// machine running the "cuda" tests).
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		if p := os.Getenv("YUEBING_TEST_BINARY"); p != "" {
			build.path = p
			return
		}
		dir, err := os.MkdirTemp("", "yuebing-servetest-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "yuebing")
		build.out, build.err = exec.Command("go", "build", "-o", build.path, "github.com/yuebing/yuebing/cmd/yuebing").CombinedOutput()
	})
	if build.err != nil {
		t.Fatalf("building yuebing: %v\n%s", build.err, build.out)
	}
	return build.path
}

// Process is a running child started by Start.
type Process struct {
	Cmd *exec.Cmd
	// Banner maps each banner line's first field to its second.
	Banner map[string]string
	stderr *lockedBuffer
	done   chan struct{}
	err    error
}

// Start runs the binary with args, reads its banner up to the line whose
// first field is last, and kills the process when the test ends (printing
// its stderr if the test failed).
func Start(t testing.TB, last string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "YUEBING_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", args[0], p.stderr.String())
		}
	})
	found := make(chan map[string]string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		lines := map[string]string{}
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 {
				lines[f[0]] = f[1]
			}
			if len(f) > 0 && f[0] == last {
				found <- lines
				break
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case p.Banner = <-found:
	case <-p.done:
		t.Fatalf("%s exited before its banner: %v\n%s", args[0], p.err, p.stderr.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("no banner from %s\n%s", args[0], p.stderr.String())
	}
	return p
}

// Kill kills the process (SIGKILL: no goodbye) and waits for it.
func (p *Process) Kill() {
	select {
	case <-p.done:
	default:
		p.Cmd.Process.Kill()
		<-p.done
	}
}

// Stop sends SIGTERM and waits up to a minute for a graceful exit.
func (p *Process) Stop(t testing.TB) {
	t.Helper()
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit on SIGTERM\n%s", p.Cmd.Args[1], p.stderr.String())
	}
}

// Serve starts `yuebing serve` on a free loopback port with a small store
// under a temporary directory and returns its HTTP base URL. Later args
// win over the defaults (e.g. "--data-dir", dir).
func Serve(t testing.TB, args ...string) (*Process, string) {
	t.Helper()
	base := []string{"serve", "--http-listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--dram-capacity", "64MiB", "--ssd-capacity", "256MiB", "--resp-listen", "", "--transfer-listen", "",
		"--shutdown-timeout", "5s", "--log-level", "warn"}
	p := Start(t, "auth", append(base, args...)...)
	return p, p.Banner["http"]
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
