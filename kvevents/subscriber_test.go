package kvevents

import (
	"encoding/hex"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/kvevents/kveventstest"
)

const (
	testNS = "acme/llama"
	testBS = 16
)

type publisher = kveventstest.Publisher

func startPublisher(t *testing.T, args ...string) *publisher { return kveventstest.Start(t, args...) }

func stored(hashes []int64, parent any, tokens []uint32) map[string]any {
	return kveventstest.Stored(hashes, parent, tokens, testBS)
}

var (
	removed = kveventstest.Removed
	cleared = kveventstest.Cleared
	waitFor = kveventstest.WaitFor
)

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

func subscribe(t *testing.T, p *publisher, v *view) *Subscriber {
	t.Helper()
	s := runSubscriber(t, p.Endpoint, p.Replay, v)
	// A PUB socket drops what it sends before the subscription reaches
	// it. Empty batches until one arrives make the stream's start certain.
	p.Prime(func() bool { return s.Stats().Batches.Load() > 0 })
	return s
}

// runSubscriber runs a subscriber of endpoint (and replay, if not empty)
// into v until the test ends, and waits for it to connect or listen.
func runSubscriber(t *testing.T, endpoint, replay string, v *view) *Subscriber {
	t.Helper()
	s, err := NewSubscriber(Options{
		Engine: "e0", Endpoint: endpoint, Replay: replay, Namespace: testNS, BlockSize: testBS, Sink: v,
		RetryInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { <-done })
	waitFor(t, "the subscriber to connect", s.Connected)
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
				p.Batch(false, stored([]int64{-11, 12}, nil, ts[:2*testBS]))
				p.Batch(false, stored([]int64{13}, 12, ts[2*testBS:]))
				p.Sync()
				waitFor(t, "three chained blocks", func() bool { return v.has(keys...) })
				if v.len() != 3 {
					t.Fatalf("view holds %d blocks, want 3", v.len())
				}

				p.Batch(false, removed(13))
				p.Sync()
				waitFor(t, "the third block's removal", func() bool { return !v.has(keys[2]) })
				if !v.has(keys[:2]...) {
					t.Fatal("removing the third block dropped others")
				}

				p.Batch(false, cleared())
				p.Sync()
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
	replayed := s.Stats().Replayed.Load() // priming batches a late joiner replayed

	ts := tokens(2, 3)
	keys := chainKeys(t, ts)
	p.Batch(false, stored([]int64{1}, nil, ts[:testBS]))
	// The next two batches never reach the subscriber live.
	p.Batch(true, stored([]int64{2}, 1, ts[testBS:2*testBS]))
	p.Batch(true, stored([]int64{3}, 2, ts[2*testBS:]))
	p.Batch(false, removed(1))
	p.Sync()
	waitFor(t, "the replayed blocks", func() bool { return v.has(keys[1:]...) && !v.has(keys[0]) })
	st := s.Stats()
	if st.Gaps.Load() != 1 || st.Replayed.Load()-replayed != 2 || st.Unrecovered.Load() != 0 {
		t.Fatalf("gaps %d replayed %d unrecovered %d, want 1, 2, 0", st.Gaps.Load(), st.Replayed.Load()-replayed, st.Unrecovered.Load())
	}
}

func TestSubscriberResetsOnUnrecoverableGap(t *testing.T) {
	p := startPublisher(t, "--no-replay")
	v := &view{blocks: map[block.Key]index.TierMask{}}
	s := subscribe(t, p, v)

	a, b := tokens(3, 1), tokens(4, 1)
	ka, kb := chainKeys(t, a), chainKeys(t, b)
	p.Batch(false, stored([]int64{1}, nil, a))
	p.Sync()
	waitFor(t, "the first block", func() bool { return v.has(ka...) })
	// The removal of block 1 is lost: without a replay socket the view
	// must not keep it.
	p.Batch(true, removed(1))
	p.Batch(false, stored([]int64{2}, nil, b))
	p.Sync()
	waitFor(t, "the reset", func() bool { return v.has(kb...) && !v.has(ka...) })
	if st := s.Stats(); st.Gaps.Load() != 1 || st.Unrecovered.Load() != 1 {
		t.Fatalf("gaps %d unrecovered %d, want 1 and 1", st.Gaps.Load(), st.Unrecovered.Load())
	}
}

func TestSubscriberSkipsMalformed(t *testing.T) {
	p := startPublisher(t)
	v := &view{blocks: map[block.Key]index.TierMask{}}
	s := subscribe(t, p, v)

	// A block stored; then a two-frame message, a payload that is not
	// msgpack, and one that is msgpack but not a batch; then a good batch.
	before := tokens(6, 1)
	p.Batch(false, stored([]int64{8}, nil, before))
	p.Sync()
	waitFor(t, "the first batch", func() bool { return v.has(chainKeys(t, before)...) })
	p.Send(map[string]any{"op": "raw", "frames": []string{"", "00"}})
	p.Send(map[string]any{"op": "garbage", "payload": "c1c1c1"})
	p.Send(map[string]any{"op": "garbage", "payload": hex.EncodeToString([]byte{0x92, 0xa1, 'x', 0x90})})
	ts := tokens(5, 1)
	p.Batch(false, stored([]int64{9}, nil, ts))
	p.Sync()
	waitFor(t, "the good batch", func() bool { return v.has(chainKeys(t, ts)...) })
	// What the unreadable batches removed is unknown: the view started
	// over rather than keep blocks the engine may have dropped.
	if v.has(chainKeys(t, before)...) {
		t.Fatal("blocks stored before an unreadable batch are still in the view")
	}
	if st := s.Stats(); st.Malformed.Load() != 3 || st.Gaps.Load() != 0 || st.Unrecovered.Load() != 2 {
		t.Fatalf("malformed %d gaps %d unrecovered %d, want 3, 0 and 2", st.Malformed.Load(), st.Gaps.Load(), st.Unrecovered.Load())
	}
}

func TestSubscriberEngineRestart(t *testing.T) {
	p := startPublisher(t)
	v := &view{blocks: map[block.Key]index.TierMask{}}
	s := subscribe(t, p, v)

	old := tokens(6, 2)
	for i := range 8 { // a history longer than what the new engine sends
		p.Batch(false, stored([]int64{int64(100 + i)}, nil, old[:testBS]))
	}
	p.Sync()
	waitFor(t, "the old engine's block", func() bool { return v.has(chainKeys(t, old)[0]) })
	p.Kill()

	p2 := startPublisher(t, "--pub-port", p.PubPort, "--replay-port", p.ReplayPort)
	waitFor(t, "the reconnection", func() bool { return s.Stats().Reconnects.Load() >= 1 && s.Connected() })
	fresh := tokens(7, 1)
	for !v.has(chainKeys(t, fresh)...) {
		p2.Batch(false, stored([]int64{1}, nil, fresh))
		p2.Sync()
		time.Sleep(20 * time.Millisecond)
	}
	if v.has(chainKeys(t, old)[0]) {
		t.Fatal("the restarted engine's view kept the old engine's block")
	}
	if st := s.Stats(); st.Restarts.Load() != 1 {
		t.Fatalf("restarts %d, want 1", st.Restarts.Load())
	}
}

// TestSubscriberEngineRestartUnseen: an engine that restarted while the
// subscriber was away, and numbered past the last batch seen before the
// subscriber is back, is told apart by its replay of that batch: the view
// starts over from the new process's history.
func TestSubscriberEngineRestartUnseen(t *testing.T) {
	p := startPublisher(t)
	v := &view{blocks: map[block.Key]index.TierMask{}}
	s := subscribe(t, p, v)
	old := tokens(6, 1)
	for i := range 4 {
		p.Batch(false, stored([]int64{int64(100 + i)}, nil, old))
	}
	p.Sync()
	waitFor(t, "the old engine's block", func() bool { return v.has(chainKeys(t, old)...) })
	seen := s.Stats().Batches.Load() // the old process's batches, so its last number + 1
	p.Kill()

	// The new process's first batches go out before the subscriber is
	// back: never seen live.
	p2 := startPublisher(t, "--pub-port", p.PubPort, "--replay-port", p.ReplayPort)
	fresh := tokens(8, 1)
	for range seen + 4 {
		p2.Batch(true, stored([]int64{1}, nil, fresh))
	}
	waitFor(t, "the reconnection", func() bool { return s.Stats().Reconnects.Load() >= 1 && s.Connected() })
	other := tokens(9, 1)
	for !v.has(chainKeys(t, other)...) {
		p2.Batch(false, stored([]int64{2}, nil, other))
		p2.Sync()
		time.Sleep(20 * time.Millisecond)
	}
	if v.has(chainKeys(t, old)...) {
		t.Fatal("the view kept the old process's block")
	}
	if !v.has(chainKeys(t, fresh)...) {
		t.Fatal("the new process's history was not replayed")
	}
	if st := s.Stats(); st.Restarts.Load() != 1 || st.Unrecovered.Load() != 0 {
		t.Fatalf("restarts %d unrecovered %d, want 1 and 0", st.Restarts.Load(), st.Unrecovered.Load())
	}
}

func ExampleHashInt() {
	fmt.Println(HashInt(42), HashBytes([]byte{0xab, 0xcd}))
	// Output: 42 abcd
}

// TestSubscriberBoundsReplay: a replay past MaxReplayBytes is refused, and
// the gap it was to fill resets the view.
func TestSubscriberBoundsReplay(t *testing.T) {
	p := startPublisher(t)
	v := &view{blocks: map[block.Key]index.TierMask{}}
	s, err := NewSubscriber(Options{
		Engine: "e0", Endpoint: p.Endpoint, Replay: p.Replay, Namespace: testNS, BlockSize: testBS, Sink: v,
		RetryInterval: 50 * time.Millisecond, MaxReplayBytes: 64,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Run(t.Context()); close(done) }()
	t.Cleanup(func() { <-done })
	waitFor(t, "the subscriber to connect", s.Connected)
	p.Prime(func() bool { return s.Stats().Batches.Load() > 0 })
	// A subscriber that joined after the first priming batch replays the
	// ones before it (empty, under the bound): count from here.
	replayed := s.Stats().Replayed.Load()

	a, b := tokens(10, 1), tokens(11, 1)
	p.Batch(false, stored([]int64{1}, nil, a))
	p.Batch(true, stored([]int64{2}, nil, tokens(12, 4))) // over 64 bytes
	p.Batch(false, stored([]int64{3}, nil, b))
	p.Sync()
	waitFor(t, "the reset", func() bool { return v.has(chainKeys(t, b)...) && !v.has(chainKeys(t, a)...) })
	if st := s.Stats(); st.Gaps.Load() != 1 || st.Unrecovered.Load() != 1 || st.Replayed.Load() != replayed {
		t.Fatalf("gaps %d unrecovered %d replayed %d since priming, want 1 1 0", st.Gaps.Load(), st.Unrecovered.Load(), st.Replayed.Load()-replayed)
	}
}

// TestSubscriberBinds: with an endpoint of host "*" the subscriber binds
// and the engine connects, as vLLM does when its endpoint names the
// subscriber's host.
func TestSubscriberBinds(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	v := &view{blocks: map[block.Key]index.TierMask{}}
	s := runSubscriber(t, fmt.Sprintf("tcp://*:%d", port), "", v)
	p := startPublisher(t, "--no-replay", "--connect", fmt.Sprintf("tcp://127.0.0.1:%d", port))
	p.Prime(func() bool { return s.Stats().Batches.Load() > 0 })
	ts := tokens(7, 2)
	p.Batch(false, stored([]int64{1, 2}, nil, ts))
	p.Sync()
	waitFor(t, "the engine's blocks", func() bool { return v.has(chainKeys(t, ts)...) })
}
