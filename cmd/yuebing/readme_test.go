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
// the block's last command runs until Ctrl-C, and is ready once it printed
// text; curl: the curl line it printed answers with text; output: the block
// shows what the block before it prints, and is not run.
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
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "## A quick tour" {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf(`no "## A quick tour" section`)
	}
	var blocks []tourBlock
	var pending *tourBlock
	for i := start; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "## ") {
			break
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
// the binary the tests built for `go run ./cmd/yuebing`.
func tourCommand(ctx context.Context, command, dir string, env []string) *exec.Cmd {
	command = strings.ReplaceAll(command, "go run ./cmd/yuebing", strconv.Quote(binary))
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
	commands := b.commands
	if b.ready != "" {
		commands = commands[:len(commands)-1]
	}
	for _, c := range commands {
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
	if b.ready != "" {
		all.WriteString(runUntilCtrlC(ctx, t, b, dir, env))
	}
	for _, e := range b.expect {
		if !strings.Contains(all.String(), e) {
			t.Errorf("the README says the block at line %d prints %q; it printed:\n%s", b.line, e, all.String())
		}
	}
}

// runUntilCtrlC starts the block's last command, waits until it prints
// b.ready, runs the curl it printed, interrupts it as Ctrl-C does and
// checks that it exits 0. It returns what the command printed.
func runUntilCtrlC(ctx context.Context, t *testing.T, b tourBlock, dir string, env []string) string {
	c := b.commands[len(b.commands)-1]
	t.Logf("$ %s", c)
	// The binary itself, not a shell around it, gets the SIGINT.
	cmd := tourCommand(ctx, "exec "+c, dir, env)
	out := newSyncBuffer()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	defer func() {
		if !exited {
			cmd.Process.Kill()
			<-done
		}
	}()
	deadline := time.After(2 * time.Minute)
	for !strings.Contains(out.String(), b.ready) {
		select {
		case err := <-done:
			exited = true
			t.Fatalf("%s ended (%v) before printing %q:\n%s", c, err, b.ready, out)
		case <-deadline:
			t.Fatalf("%s did not print %q in 2 minutes:\n%s", c, b.ready, out)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if b.curl != "" {
		var curl string
		sc := bufio.NewScanner(strings.NewReader(out.String()))
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "curl ") {
				curl = l
				break
			}
		}
		if curl == "" {
			t.Errorf("%s printed no curl line:\n%s", c, out)
		} else if _, err := exec.LookPath("curl"); err != nil {
			t.Logf("curl is not installed (CI installs it); not trying %s", curl)
		} else {
			t.Logf("$ %s", curl)
			answer, err := exec.CommandContext(ctx, "bash", "-c", curl+" --silent --show-error").CombinedOutput()
			if err != nil || !strings.Contains(string(answer), b.curl) {
				t.Errorf("%s: %v; want an answer with %q, got:\n%s", curl, err, b.curl, answer)
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		exited = true
		if err != nil {
			t.Errorf("%s after Ctrl-C: %v, want exit status 0:\n%s", c, err, out)
		}
	case <-time.After(time.Minute):
		t.Errorf("%s still running a minute after Ctrl-C:\n%s", c, out)
	}
	return out.String()
}
