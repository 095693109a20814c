// Package kveventstest runs a KV event publisher in vLLM's exact wire
// format for tests: vllm_publisher.py on Debian's python3-zmq and
// python3-msgpack, driven over its stdin.
package kveventstest

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Python is Debian's interpreter, which sees Debian's python3-zmq.
const Python = "/usr/bin/python3"

// Publisher is a running publisher process.
type Publisher struct {
	t   testing.TB
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	// PubPort and ReplayPort are the bound ports ("0": no replay socket).
	PubPort, ReplayPort string
	// Endpoint and Replay are the sockets to subscribe to; Replay is
	// empty without a replay socket.
	Endpoint, Replay string
}

// Start runs a publisher with the script's flags (see vllm_publisher.py:
// --layout, --hash, --no-replay, --pub-port, --replay-port, --topic). It
// skips the test when python3-zmq or python3-msgpack is missing.
func Start(t testing.TB, args ...string) *Publisher {
	t.Helper()
	if err := exec.Command(Python, "-c", "import zmq, msgpack").Run(); err != nil {
		t.Skipf("needs %s with python3-zmq and python3-msgpack (Debian packages): %v", Python, err)
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "vllm_publisher.py")
	cmd := exec.Command(Python, append([]string{script}, args...)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Publisher{t: t, cmd: cmd, in: in, out: bufio.NewScanner(outR)}
	t.Cleanup(p.Stop)
	if !p.out.Scan() {
		t.Fatalf("publisher exited before READY: %v", p.out.Err())
	}
	f := strings.Fields(p.out.Text())
	if len(f) != 3 || f[0] != "READY" {
		t.Fatalf("publisher said %q, want READY <pub> <replay>", p.out.Text())
	}
	p.PubPort, p.ReplayPort = f[1], f[2]
	p.Endpoint = "tcp://127.0.0.1:" + f[1]
	if f[2] != "0" {
		p.Replay = "tcp://127.0.0.1:" + f[2]
	}
	return p
}

// Stop ends the publisher (closing its stdin) and waits for it.
func (p *Publisher) Stop() {
	if p.cmd.Process == nil || p.cmd.ProcessState != nil {
		return
	}
	p.in.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// Kill kills the publisher, as an engine crash would.
func (p *Publisher) Kill() {
	p.t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		p.t.Fatal(err)
	}
	p.cmd.Wait()
}

// Send writes one command.
func (p *Publisher) Send(cmd map[string]any) {
	p.t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatal(err)
	}
}

// Sync waits until the publisher has handled every command sent so far.
func (p *Publisher) Sync() {
	p.t.Helper()
	p.Send(map[string]any{"op": "sync"})
	if !p.out.Scan() || p.out.Text() != "OK" {
		p.t.Fatalf("publisher did not answer sync: %q %v", p.out.Text(), p.out.Err())
	}
}

// Batch publishes one batch of events; with drop it is numbered and kept
// for replay but not sent, as a PUB socket past its high-water mark drops it.
func (p *Publisher) Batch(drop bool, events ...map[string]any) {
	p.t.Helper()
	if events == nil {
		events = []map[string]any{}
	}
	p.Send(map[string]any{"op": "batch", "events": events, "drop": drop})
}

// Stored is a BlockStored event on the GPU.
func Stored(hashes []int64, parent any, tokens []uint32, blockSize int) map[string]any {
	return map[string]any{"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent,
		"token_ids": tokens, "block_size": blockSize, "lora_id": nil, "medium": "GPU"}
}

// Removed is a BlockRemoved event on the GPU.
func Removed(hashes ...int64) map[string]any {
	return map[string]any{"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU"}
}

// Cleared is an AllBlocksCleared event.
func Cleared() map[string]any { return map[string]any{"type": "AllBlocksCleared"} }

// WaitFor polls cond until it holds, failing the test after a generous
// timeout (the machine may be loaded).
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Prime publishes empty batches until seen() reports one arrived: a PUB
// socket drops what it sends before a subscription reaches it, so this
// makes the start of a stream certain.
func (p *Publisher) Prime(seen func() bool) {
	p.t.Helper()
	for i := 0; !seen(); i++ {
		if i > 3000 {
			p.t.Fatal("no batch reached the subscriber")
		}
		p.Batch(false)
		p.Sync()
		time.Sleep(10 * time.Millisecond)
	}
}
