package kvevents

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

const (
	testNS = "acme/llama"
	testBS = 16
	python = "/usr/bin/python3"
)

// publisher is a vLLM-format publisher process (testdata/vllm_publisher.py
// on Debian's python3-zmq and python3-msgpack).
type publisher struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	pub    string
	replay string
	ports  [2]string
}

func startPublisher(t *testing.T, args ...string) *publisher {
	t.Helper()
	if err := exec.Command(python, "-c", "import zmq, msgpack").Run(); err != nil {
		t.Skipf("needs %s with python3-zmq and python3-msgpack (Debian packages): %v", python, err)
	}
	cmd := exec.Command(python, append([]string{"testdata/vllm_publisher.py"}, args...)...)
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
	p := &publisher{t: t, cmd: cmd, in: in, out: bufio.NewScanner(outR)}
	t.Cleanup(p.stop)
	if !p.out.Scan() {
		t.Fatalf("publisher exited before READY: %v", p.out.Err())
	}
	f := strings.Fields(p.out.Text())
	if len(f) != 3 || f[0] != "READY" {
		t.Fatalf("publisher said %q, want READY <pub> <replay>", p.out.Text())
	}
	p.ports = [2]string{f[1], f[2]}
	p.pub = "tcp://127.0.0.1:" + f[1]
	if f[2] != "0" {
		p.replay = "tcp://127.0.0.1:" + f[2]
	}
	return p
}

func (p *publisher) stop() {
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

func (p *publisher) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		p.t.Fatal(err)
	}
	p.cmd.Wait()
}

func (p *publisher) send(cmd map[string]any) {
	p.t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatal(err)
	}
}

// sync waits until the publisher has handled every command sent so far.
func (p *publisher) sync() {
	p.t.Helper()
	p.send(map[string]any{"op": "sync"})
	if !p.out.Scan() || p.out.Text() != "OK" {
		p.t.Fatalf("publisher did not answer sync: %q %v", p.out.Text(), p.out.Err())
	}
}

func (p *publisher) batch(drop bool, events ...map[string]any) {
	p.t.Helper()
	if events == nil {
		events = []map[string]any{}
	}
	p.send(map[string]any{"op": "batch", "events": events, "drop": drop})
}

func stored(hashes []int64, parent any, tokens []uint32) map[string]any {
	return map[string]any{"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent,
		"token_ids": tokens, "block_size": testBS, "lora_id": nil, "medium": "GPU"}
}

func removed(hashes ...int64) map[string]any {
	return map[string]any{"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU"}
}

func cleared() map[string]any { return map[string]any{"type": "AllBlocksCleared"} }

func tokens(seed, blocks int) []uint32 {
	ts := make([]uint32, blocks*testBS)
	for i := range ts {
		ts[i] = uint32(seed*100003 + i)
	}
	return ts
}

// view is a Sink holding what an engine's events say it holds.
type view struct {
	mu     sync.Mutex
	blocks map[block.Key]index.TierMask
	resets int
}

func (v *view) Apply(u Update) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if u.Reset {
		clear(v.blocks)
		v.resets++
	}
	for _, c := range u.Changes {
		if c.Tiers == 0 {
			delete(v.blocks, c.Key)
		} else {
			v.blocks[c.Key] = c.Tiers
		}
	}
}

func (v *view) has(keys ...block.Key) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, k := range keys {
		if v.blocks[k] == 0 {
			return false
		}
	}
	return true
}

func (v *view) len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.blocks)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func subscribe(t *testing.T, p *publisher, v *view) *Subscriber {
	t.Helper()
	s, err := NewSubscriber(Options{
		Engine: "e0", Endpoint: p.pub, Replay: p.replay, Namespace: testNS, BlockSize: testBS, Sink: v,
		RetryInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { <-done })
	// A PUB socket drops what it sends before the subscription reaches
	// it. Empty batches until one arrives make the stream's start certain.
	waitFor(t, "the subscriber to connect", s.Connected)
	for i := 0; s.Stats().Batches.Load() == 0; i++ {
		if i > 3000 {
			t.Fatal("no batch reached the subscriber")
		}
		p.batch(false)
		p.sync()
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

func chainKeys(t *testing.T, ts []uint32) []block.Key {
	t.Helper()
	ks, err := block.ChainKeys(testNS, testBS, ts)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestSubscriberFollowsEngine(t *testing.T) {
	for _, layout := range []string{"array", "map"} {
		for _, hash := range []string{"int", "bytes"} {
			t.Run(layout+"/"+hash, func(t *testing.T) {
				p := startPublisher(t, "--layout", layout, "--hash", hash)
				v := &view{blocks: map[block.Key]index.TierMask{}}
				s := subscribe(t, p, v)

				ts := tokens(1, 3)
				keys := chainKeys(t, ts)
				// Two blocks, then a third chained to the second by its hash.
				p.batch(false, stored([]int64{-11, 12}, nil, ts[:2*testBS]))
				p.batch(false, stored([]int64{13}, 12, ts[2*testBS:]))
				p.sync()
				waitFor(t, "three chained blocks", func() bool { return v.has(keys...) })
				if v.len() != 3 {
					t.Fatalf("view holds %d blocks, want 3", v.len())
				}

				p.batch(false, removed(13))
				p.sync()
				waitFor(t, "the third block's removal", func() bool { return !v.has(keys[2]) })
				if !v.has(keys[:2]...) {
					t.Fatal("removing the third block dropped others")
				}

				p.batch(false, cleared())
				p.sync()
				waitFor(t, "AllBlocksCleared", func() bool { return v.len() == 0 })
				st := s.Stats()
				if st.Gaps.Load() != 0 || st.Malformed.Load() != 0 || st.Orphans.Load() != 0 {
					t.Fatalf("gaps %d malformed %d orphans %d, want none", st.Gaps.Load(), st.Malformed.Load(), st.Orphans.Load())
				}
				if lag := st.Lag(); lag < -time.Second || lag > time.Minute {
					t.Fatalf("lag %v on one host", lag)
				}
			})
		}
	}
}

func TestSubscriberRecoversGapsByReplay(t *testing.T) {
	p := startPublisher(t)
	v := &view{blocks: map[block.Key]index.TierMask{}}
	s := subscribe(t, p, v)

	ts := tokens(2, 3)
	keys := chainKeys(t, ts)
	p.batch(false, stored([]int64{1}, nil, ts[:testBS]))
	// The next two batches never reach the subscriber live.
	p.batch(true, stored([]int64{2}, 1, ts[testBS:2*testBS]))
	p.batch(true, stored([]int64{3}, 2, ts[2*testBS:]))
	p.batch(false, removed(1))
	p.sync()
	waitFor(t, "the replayed blocks", func() bool { return v.has(keys[1:]...) && !v.has(keys[0]) })
	st := s.Stats()
	if st.Gaps.Load() != 1 || st.Replayed.Load() != 2 || st.Unrecovered.Load() != 0 {
		t.Fatalf("gaps %d replayed %d unrecovered %d, want 1, 2, 0", st.Gaps.Load(), st.Replayed.Load(), st.Unrecovered.Load())
	}
}

func TestSubscriberResetsOnUnrecoverableGap(t *testing.T) {
	p := startPublisher(t, "--no-replay")
	v := &view{blocks: map[block.Key]index.TierMask{}}
	s := subscribe(t, p, v)

	a, b := tokens(3, 1), tokens(4, 1)
	ka, kb := chainKeys(t, a), chainKeys(t, b)
	p.batch(false, stored([]int64{1}, nil, a))
	p.sync()
	waitFor(t, "the first block", func() bool { return v.has(ka...) })
	// The removal of block 1 is lost: without a replay socket the view
	// must not keep it.
	p.batch(true, removed(1))
	p.batch(false, stored([]int64{2}, nil, b))
	p.sync()
	waitFor(t, "the reset", func() bool { return v.has(kb...) && !v.has(ka...) })
	if st := s.Stats(); st.Gaps.Load() != 1 || st.Unrecovered.Load() != 1 {
		t.Fatalf("gaps %d unrecovered %d, want 1 and 1", st.Gaps.Load(), st.Unrecovered.Load())
	}
}

func TestSubscriberSkipsMalformed(t *testing.T) {
	p := startPublisher(t)
	v := &view{blocks: map[block.Key]index.TierMask{}}
	s := subscribe(t, p, v)

	// A two-frame message, a payload that is not msgpack, and one that is
	// msgpack but not a batch; then a good batch.
	p.send(map[string]any{"op": "raw", "frames": []string{"", "00"}})
	p.send(map[string]any{"op": "garbage", "payload": "c1c1c1"})
	p.send(map[string]any{"op": "garbage", "payload": hex.EncodeToString([]byte{0x92, 0xa1, 'x', 0x90})})
	ts := tokens(5, 1)
	p.batch(false, stored([]int64{9}, nil, ts))
	p.sync()
	waitFor(t, "the good batch", func() bool { return v.has(chainKeys(t, ts)...) })
	if st := s.Stats(); st.Malformed.Load() != 3 || st.Gaps.Load() != 0 {
		t.Fatalf("malformed %d gaps %d, want 3 and 0", st.Malformed.Load(), st.Gaps.Load())
	}
}

func TestSubscriberEngineRestart(t *testing.T) {
	p := startPublisher(t)
	v := &view{blocks: map[block.Key]index.TierMask{}}
	s := subscribe(t, p, v)

	old := tokens(6, 2)
	for i := range 8 { // a history longer than what the new engine sends
		p.batch(false, stored([]int64{int64(100 + i)}, nil, old[:testBS]))
	}
	p.sync()
	waitFor(t, "the old engine's block", func() bool { return v.has(chainKeys(t, old)[0]) })
	p.kill()

	p2 := startPublisher(t, "--pub-port", p.ports[0], "--replay-port", p.ports[1])
	waitFor(t, "the reconnection", func() bool { return s.Stats().Reconnects.Load() >= 1 && s.Connected() })
	fresh := tokens(7, 1)
	for !v.has(chainKeys(t, fresh)...) {
		p2.batch(false, stored([]int64{1}, nil, fresh))
		p2.sync()
		time.Sleep(20 * time.Millisecond)
	}
	if v.has(chainKeys(t, old)[0]) {
		t.Fatal("the restarted engine's view kept the old engine's block")
	}
	if st := s.Stats(); st.Restarts.Load() != 1 {
		t.Fatalf("restarts %d, want 1", st.Restarts.Load())
	}
}

func ExampleHashInt() {
	fmt.Println(HashInt(42), HashBytes([]byte{0xab, 0xcd}))
	// Output: 42 abcd
}
