package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A tourBlock is one fenced block of the README's tour with what the
// comment before it says of it:
//
//	<!-- tour: expect "text" lines 3 ready "text" curl "text" -->
//	<!-- tour: output -->
//
// expect: the block's commands print text (stdout or stderr); lines: the
// block's one command prints that many non-empty lines on stdout; ready:
// the block's `yuebing serve` and `yuebing demo` commands run until Ctrl-C
// and are ready once they printed text, the block's other commands running
// while they do; curl: the curl line the first of them printed answers with
// text; output: the block shows what the block before it prints, and is not
// run. Blocks outside the tour may have a tour comment too, and then run.
type tourBlock struct {
	line     int      // of the fence, 1-based
	commands []string // one a command, continuation lines joined
	output   bool
	expect   []string
	lines    int // -1: not checked
	ready    string
	curl     string
}

var (
	tourComment   = regexp.MustCompile(`^<!--\s*tour:(.*?)-->\s*$`)
	tourDirective = regexp.MustCompile(`(\w+)(?:\s+(?:"([^"]*)"|(\d+)))?`)
)

// tourBlocks reads the fenced blocks of the section "A quick tour" of a
// README; every one must have its tour comment right before it.
func tourBlocks(readme string) ([]tourBlock, error) {
	lines := strings.Split(readme, "\n")
	found := false
	inTour := false
	var blocks []tourBlock
	var pending *tourBlock
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "## ") {
			inTour = strings.TrimSpace(l) == "## A quick tour"
			found = found || inTour
		}
		if m := tourComment.FindStringSubmatch(l); m != nil {
			b := tourBlock{lines: -1}
			for _, d := range tourDirective.FindAllStringSubmatch(m[1], -1) {
				switch d[1] {
				case "output":
					b.output = true
				case "expect":
					b.expect = append(b.expect, d[2])
				case "ready":
					b.ready = d[2]
				case "curl":
					b.curl = d[2]
				case "lines":
					n, err := strconv.Atoi(d[3])
					if err != nil {
						return nil, fmt.Errorf("line %d: lines needs a number: %q", i+1, l)
					}
					b.lines = n
				default:
					return nil, fmt.Errorf("line %d: unknown tour directive %q", i+1, d[1])
				}
			}
			pending = &b
			continue
		}
		if !strings.HasPrefix(l, "```") {
			if pending != nil && strings.TrimSpace(l) != "" {
				return nil, fmt.Errorf("line %d: a tour comment is not followed by a fenced block", i)
			}
			continue
		}
		if pending == nil && !inTour {
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			}
			continue
		}
		if pending == nil {
			return nil, fmt.Errorf("line %d: a fenced block of the tour has no <!-- tour: ... --> comment before it", i+1)
		}
		b := *pending
		pending = nil
		b.line = i + 1
		var cmd string
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			c := strings.TrimPrefix(lines[i], "$ ")
			if strings.HasSuffix(c, `\`) {
				cmd += strings.TrimSuffix(c, `\`)
				continue
			}
			cmd += c
			if strings.TrimSpace(cmd) != "" {
				b.commands = append(b.commands, strings.TrimSpace(cmd))
			}
			cmd = ""
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: unterminated fenced block", b.line)
		}
		if !b.output && len(b.commands) == 0 {
			return nil, fmt.Errorf("line %d: an empty block", b.line)
		}
		if b.lines >= 0 && len(b.commands) != 1 {
			return nil, fmt.Errorf("line %d: lines checks a block of one command", b.line)
		}
		blocks = append(blocks, b)
	}
	if !found {
		return nil, fmt.Errorf(`no "## A quick tour" section`)
	}
	return blocks, nil
}

// TestReadmeTourBlocks checks that the README's tour parses: every fenced
// block has its comment, and there is a command to run.
func TestReadmeTourBlocks(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := tourBlocks(string(readme))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	for _, b := range blocks {
		t.Logf("line %d: %q expect %q lines %d ready %q curl %q output %v", b.line, b.commands, b.expect, b.lines, b.ready, b.curl, b.output)
	}
	if _, err := tourBlocks("## A quick tour\n\n```\nls\n```\n"); err == nil {
		t.Error("a tour block without its comment parsed")
	}
}

// TestReadmeTour runs the README's tour as a newcomer does: in a fresh
// clone of the repository, every command of every block, each of which
// must exit 0 and print what the README's comment before it says. The
// commands' `go run ./cmd/yuebing` is the binary the tests built; `yuebing
// demo` runs until it is ready, its curl is tried, and Ctrl-C (SIGINT) must
// stop it with status 0.
func TestReadmeTour(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the README's tour, over a minute")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := tourBlocks(string(readme))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if len(blocks) < 4 {
		t.Fatalf("README.md: %d blocks in the tour, want at least 4", len(blocks))
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skipf("%s is not a git checkout to clone: %v", root, err)
	}
	clone := filepath.Join(t.TempDir(), "yuebing")
	if out, err := exec.Command("git", "clone", "--quiet", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	env := append(envWithout("YUEBING_"), "TMPDIR="+t.TempDir())
	for _, b := range blocks {
		if b.output {
			continue
		}
		t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
			runTourBlock(t, b, clone, env)
		})
	}
}

// tourCommand is a README command as the shell runs it in the clone, with
// the binary the tests built for `go run ./cmd/yuebing`, and paths under
// /tmp/ under the environment's TMPDIR.
func tourCommand(ctx context.Context, command, dir string, env []string) *exec.Cmd {
	command = strings.ReplaceAll(command, "go run ./cmd/yuebing", strconv.Quote(binary))
	for _, kv := range env {
		if tmp, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
			command = strings.ReplaceAll(command, " /tmp/", " "+tmp+"/")
		}
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Dir = dir
	cmd.Env = env
	return cmd
}

// needTool skips t when the command's program (other than the binary) is
// not installed.
func needTool(t *testing.T, command string) {
	t.Helper()
	f := strings.Fields(command)
	if len(f) == 0 || strings.HasPrefix(command, "go run ./cmd/yuebing") {
		return
	}
	if _, err := exec.LookPath(f[0]); err != nil {
		t.Skipf("%s is not installed (CI installs it): %s", f[0], command)
	}
}

func runTourBlock(t *testing.T, b tourBlock, dir string, env []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var all strings.Builder
	var running []*untilCtrlC
	defer func() {
		for _, r := range running {
			r.kill()
		}
	}()
	for _, c := range b.commands {
		if b.ready != "" && (strings.Contains(c, "cmd/yuebing serve") || strings.Contains(c, "cmd/yuebing demo")) {
			running = append(running, startUntilReady(ctx, t, c, b.ready, dir, env))
			continue
		}
		needTool(t, c)
		t.Logf("$ %s", c)
		cmd := tourCommand(ctx, c, dir, env)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		began := time.Now()
		err := cmd.Run()
		t.Logf("%.1f s", time.Since(began).Seconds())
		if err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", c, err, stdout.String(), stderr.String())
		}
		if b.lines >= 0 {
			n := 0
			for _, l := range strings.Split(stdout.String(), "\n") {
				if strings.TrimSpace(l) != "" {
					n++
				}
			}
			if n != b.lines {
				t.Errorf("%s printed %d lines, the README says %d:\n%s", c, n, b.lines, stdout.String())
			}
		}
		all.WriteString(stdout.String())
		all.WriteString(stderr.String())
	}
	if b.curl != "" && len(running) > 0 {
		tryCurl(ctx, t, running[0], b.curl)
	}
	for i := len(running) - 1; i >= 0; i-- {
		all.WriteString(running[i].interrupt(t))
	}
	running = nil
	for _, e := range b.expect {
		if !strings.Contains(all.String(), e) {
			t.Errorf("the README says the block at line %d prints %q; it printed:\n%s", b.line, e, all.String())
		}
	}
}

// untilCtrlC is a command of the README that runs until Ctrl-C.
type untilCtrlC struct {
	command string
	cmd     *exec.Cmd
	out     *syncBuffer
	done    chan error
	exited  bool
}

// startUntilReady starts the command and waits until it prints ready. A
// command that ends first because one of the README's fixed ports is taken
// on this machine skips the test.
func startUntilReady(ctx context.Context, t *testing.T, c, ready, dir string, env []string) *untilCtrlC {
	t.Helper()
	t.Logf("$ %s", c)
	// The binary itself, not a shell around it, gets the SIGINT.
	cmd := tourCommand(ctx, "exec "+c, dir, env)
	r := &untilCtrlC{command: c, cmd: cmd, out: newSyncBuffer(), done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- cmd.Wait() }()
	deadline := time.After(2 * time.Minute)
	for !strings.Contains(r.out.String(), ready) {
		select {
		case err := <-r.done:
			r.exited = true
			if strings.Contains(r.out.String(), "address already in use") {
				t.Skipf("%s: a port the README names is in use on this machine:\n%s", c, r.out)
			}
			t.Fatalf("%s ended (%v) before printing %q:\n%s", c, err, ready, r.out)
		case <-deadline:
			r.kill()
			t.Fatalf("%s did not print %q in 2 minutes:\n%s", c, ready, r.out)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return r
}

// kill ends the command if it still runs.
func (r *untilCtrlC) kill() {
	if !r.exited {
		r.cmd.Process.Kill()
		<-r.done
		r.exited = true
	}
}

// interrupt sends SIGINT, as Ctrl-C does, and checks that the command
// exits 0 within a minute. It returns what the command printed.
func (r *untilCtrlC) interrupt(t *testing.T) string {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.done:
		r.exited = true
		if err != nil {
			t.Errorf("%s after Ctrl-C: %v, want exit status 0:\n%s", r.command, err, r.out)
		}
	case <-time.After(time.Minute):
		t.Errorf("%s still running a minute after Ctrl-C:\n%s", r.command, r.out)
		r.kill()
	}
	return r.out.String()
}

// tryCurl runs the curl line the command printed and checks that the
// answer holds want.
func tryCurl(ctx context.Context, t *testing.T, r *untilCtrlC, want string) {
	t.Helper()
	var curl string
	sc := bufio.NewScanner(strings.NewReader(r.out.String()))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "curl ") {
			curl = l
			break
		}
	}
	if curl == "" {
		t.Errorf("%s printed no curl line:\n%s", r.command, r.out)
		return
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Logf("curl is not installed (CI installs it); not trying %s", curl)
		return
	}
	t.Logf("$ %s", curl)
	answer, err := exec.CommandContext(ctx, "bash", "-c", curl+" --silent --show-error").CombinedOutput()
	if err != nil || !strings.Contains(string(answer), want) {
		t.Errorf("%s: %v; want an answer with %q, got:\n%s", curl, err, want, answer)
	}
}
