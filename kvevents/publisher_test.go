package kvevents

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/kvevents/kveventstest"
)

func newPublisher(t *testing.T) *Publisher {
	t.Helper()
	p, err := NewPublisher(PublisherOptions{Endpoint: "tcp://127.0.0.1:0", Replay: "tcp://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func storedEvent(hashes []Hash, parent Hash, tokens []uint32) Event {
	return Event{Kind: BlockStored, Hashes: hashes, Parent: parent, Tokens: tokens, BlockSize: testBS, Medium: "GPU"}
}

// TestPublisherToSubscriber: batches published before the subscriber
// joined come back through the replay socket.
func TestPublisherToSubscriber(t *testing.T) {
	p := newPublisher(t)
	ts := tokens(8, 4)
	keys := chainKeys(t, ts)
	h := func(i int) Hash { return HashBytes(keys[i][:]) }
	for i := range 3 {
		if err := p.Publish([]Event{storedEvent([]Hash{h(i)}, map[bool]Hash{true: "", false: h(max(i-1, 0))}[i == 0], ts[i*testBS:(i+1)*testBS])}); err != nil {
			t.Fatal(err)
		}
	}
	v := &view{blocks: map[block.Key]index.TierMask{}}
	s, err := NewSubscriber(Options{Engine: "e", Endpoint: p.Endpoint(), Replay: p.ReplayEndpoint(), Namespace: testNS, BlockSize: testBS, Sink: v})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Run(t.Context()); close(done) }()
	t.Cleanup(func() { <-done })
	waitFor(t, "the connection", s.Connected)
	for i := 0; !v.has(keys[3]); i++ {
		if i > 2000 {
			t.Fatal("the fourth block never arrived")
		}
		if err := p.Publish([]Event{storedEvent([]Hash{h(3)}, h(2), ts[3*testBS:])}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, "the replayed history", func() bool { return v.has(keys...) })
	if s.Stats().Replayed.Load() < 3 || s.Stats().Orphans.Load() != 0 {
		t.Fatalf("replayed %d orphans %d", s.Stats().Replayed.Load(), s.Stats().Orphans.Load())
	}
}

// TestPublisherWireFormat: what the Go publisher sends is what vLLM's
// subscribers (pyzmq + msgpack) read, live and through a REQ replay.
func TestPublisherWireFormat(t *testing.T) {
	if err := exec.Command(kveventstest.Python, "-c", "import zmq, msgpack").Run(); err != nil {
		t.Skipf("needs %s with python3-zmq and python3-msgpack (Debian packages): %v", kveventstest.Python, err)
	}
	p := newPublisher(t)
	cmd := exec.Command(kveventstest.Python, filepath.Join("kveventstest", "vllm_subscriber.py"),
		"--pub", p.Endpoint(), "--replay", p.ReplayEndpoint())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "SUBSCRIBED" {
		t.Fatalf("subscriber said %q", sc.Text())
	}
	// A PUB socket drops what it sends before the subscription arrives:
	// publish the events until the subscriber has read them.
	lines := make(chan string)
	go func() {
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	ts := tokens(9, 1)
	digest := make([]byte, 32)
	digest[0] = 0xab
	events := []Event{
		storedEvent([]Hash{HashBytes(digest)}, HashInt(7), ts),
		{Kind: BlockRemoved, Hashes: []Hash{HashInt(42)}, Medium: "CPU"},
		{Kind: AllBlocksCleared},
	}
	var firstLine string
	for firstLine == "" {
		if err := p.Publish(events); err != nil {
			t.Fatal(err)
		}
		select {
		case firstLine = <-lines:
		case <-time.After(20 * time.Millisecond):
		}
	}
	got := []map[string]any{nil}
	if err := json.Unmarshal([]byte(firstLine), &got[0]); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	// Live: the events batch; replay: every batch from 0, then the end.
	if len(got) < 3 || got[0]["via"] != "pub" || got[len(got)-1]["via"] != "end" {
		t.Fatalf("subscriber read %v", got)
	}
	batch := got[0]["batch"].([]any)
	evs := batch[1].([]any)
	stored := evs[0].([]any)
	if len(batch) != 3 || batch[2].(float64) != 0 || len(evs) != 3 ||
		stored[0] != "BlockStored" || stored[1].([]any)[0] != "ab"+hexZeros(31) || stored[2].(float64) != 7 ||
		len(stored[3].([]any)) != testBS || stored[4].(float64) != testBS || stored[5] != nil || stored[6] != "GPU" ||
		evs[1].([]any)[0] != "BlockRemoved" || evs[1].([]any)[1].([]any)[0].(float64) != 42 || evs[1].([]any)[2] != "CPU" || evs[2].([]any)[0] != "AllBlocksCleared" {
		t.Fatalf("batch %v is not vLLM's layout", batch)
	}
	if n := len(got) - 2; got[n]["via"] != "replay" || got[n]["seq"].(float64) != got[0]["seq"].(float64) {
		t.Fatalf("the replay's last batch is %v, want the live one, seq %v", got[n], got[0]["seq"])
	}
}

func hexZeros(n int) string {
	b := make([]byte, 2*n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}
