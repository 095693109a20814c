package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Proc is a child process of the soak other than a node (an engine
// simulator, the router), killed and restarted on the addresses its first
// start bound. Its stdout and stderr go to its log; its banner, read from
// them, ends at the line parse reports ready.
type Proc struct {
	Name string
	Bin  string
	Args []string // flags, with the listen addresses fixed after the first start
	Env  []string
	Log  *os.File
	// Parse reads one banner line into m and says whether it ends the
	// banner.
	Parse func(line string, m map[string]string) bool
	// BannerWait bounds the wait for the banner (default 60s).
	BannerWait time.Duration

	// life counts the starts.
	life atomic.Int64

	mu     sync.Mutex
	logMu  sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	banner map[string]string
	// logStart is the log's length when the last start began.
	logStart int64
}

// startOnce runs the binary and waits for its banner.
func (p *Proc) startOnce(ctx context.Context) (map[string]string, error) {
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = p.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	logStart, _ := p.Log.Seek(0, io.SeekEnd)
	p.logStart = logStart
	p.logf("--- start %d at %s\n", p.life.Load()+1, time.Now().UTC().Format(time.RFC3339Nano))
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("bench: soak: starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	ready := make(chan map[string]string, 1)
	go p.copyLog(r, ready)
	fail := func(format string, a ...any) (map[string]string, error) {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return nil, fmt.Errorf("bench: soak: %s "+format+": %s", append([]any{p.Name}, append(a, LogTail(p.Log.Name(), logStart))...)...)
	}
	select {
	case m := <-ready:
		p.mu.Lock()
		p.cmd, p.done, p.banner = cmd, done, m
		p.mu.Unlock()
		p.life.Add(1)
		return m, nil
	case <-done:
		return fail("exited at start")
	case <-time.After(cmp.Or(p.BannerWait, 60*time.Second)):
		return fail("printed no banner within %v", cmp.Or(p.BannerWait, 60*time.Second))
	case <-ctx.Done():
		return fail("start cut: %v", ctx.Err())
	}
}

// copyLog copies the process's output to its log line by line, and sends
// the banner on ready once parse has seen its last line.
func (p *Proc) copyLog(r *os.File, ready chan<- map[string]string) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	m := map[string]string{}
	sent := false
	for sc.Scan() {
		line := sc.Text()
		p.logf("%s\n", line)
		if !sent && p.Parse(line, m) {
			ready <- m
			sent = true
		}
	}
	io.Copy(io.Discard, r)
}

func (p *Proc) logf(format string, a ...any) {
	p.logMu.Lock()
	fmt.Fprintf(p.Log, format, a...)
	p.logMu.Unlock()
}

// Start starts the process, retrying for up to retryFor: a restart right
// after kill -9 may find a port not yet free.
func (p *Proc) Start(ctx context.Context, retryFor time.Duration) (m map[string]string, retries int, err error) {
	deadline := time.Now().Add(retryFor)
	for {
		m, err = p.startOnce(ctx)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return m, retries, err
		}
		retries++
		time.Sleep(500 * time.Millisecond)
	}
}

// PinFlag sets a flag's value for the next starts.
func (p *Proc) PinFlag(flag, v string) {
	for i := 0; i+1 < len(p.Args); i++ {
		if p.Args[i] == flag {
			p.Args[i+1] = v
			return
		}
	}
}

// Pid returns the running process's id, or 0 when none runs.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// Exited reports whether the process last started has ended.
func (p *Proc) Exited() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL to the process group and waits for the process.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// Stop kills the process at the end of the soak and closes its log.
func (p *Proc) Stop() {
	p.Kill()
	if p.Log != nil {
		p.logMu.Lock()
		p.Log.Close()
		p.logMu.Unlock()
	}
}

// LogTail returns the last lines written to the log at path since off.
func LogTail(path string, off int64) string {
	b, err := os.ReadFile(path)
	if err != nil || off > int64(len(b)) {
		return "(no log)"
	}
	b = b[off:]
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
