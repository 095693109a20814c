package replicate

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// fakeExec records calls; each call waits for release (when blocking) or for
// its context, and fails when fail says so.
type fakeExec struct {
	mu       sync.Mutex
	calls    []string
	running  int
	peak     int
	blocking bool
	release  chan struct{}
	fail     func(key block.Key) error
	g        *index.Global // applies successful copies, as a node would
}

func (f *fakeExec) do(ctx context.Context, what string, key block.Key) error {
	f.mu.Lock()
	f.calls = append(f.calls, what)
	f.running++
	f.peak = max(f.peak, f.running)
	blocking, fail := f.blocking, f.fail
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running--
		f.mu.Unlock()
	}()
	if blocking {
		select {
		case <-f.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil {
		return fail(key)
	}
	return nil
}

func (f *fakeExec) snapshot() (running, peak, calls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running, f.peak, len(f.calls)
}

func (f *fakeExec) Copy(ctx context.Context, key block.Key, from, to uint32) error {
	if err := f.do(ctx, "copy", key); err != nil {
		return err
	}
	return f.g.Apply(to, []index.Change{{Key: key, Added: true}})
}

func (f *fakeExec) Drop(ctx context.Context, key block.Key, node uint32) error {
	return f.do(ctx, "drop", key)
}

// driverSetup brings up nodes 0..n-1 and puts keys on node 0 with count 2.
func driverSetup(t *testing.T, opts Options, nodes int, keys []block.Key) (*Driver, *fakeExec) {
	t.Helper()
	g := index.NewGlobal(index.GlobalOptions{})
	ex := &fakeExec{g: g, release: make(chan struct{})}
	d := NewDriver(mustCore(t, opts, g), ex, DriverOptions{Interval: time.Second})
	t.Cleanup(func() { d.Close() })
	for n := range nodes {
		if err := d.Step(NodeUp{Node: uint32(n), Capacity: 100, Free: 100}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		if err := g.Apply(0, []index.Change{{Key: k, Added: true}}); err != nil {
			t.Fatal(err)
		}
		if err := d.Step(SetReplicas{Key: k, Count: 2}); err != nil {
			t.Fatal(err)
		}
	}
	return d, ex
}

func TestDriverExecutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := keyOf("a")
		d, ex := driverSetup(t, Options{DefaultBlockSize: 1}, 2, []block.Key{k})
		time.Sleep(time.Second) // the first tick
		synctest.Wait()
		var st Stats
		var bs BlockStatus
		d.Inspect(func(c *Core) { st, bs = c.Stats(), c.status(c.blocks[k]) })
		if st.Copies != 1 || st.InFlight != 0 || st.Failed != 0 || bs.Replicas != 2 {
			t.Fatalf("after one tick: %+v, block %+v", st, bs)
		}
		if got := ex.g.ReplicaCount(k); got != 2 {
			t.Fatalf("index has %d replicas", got)
		}
		// Nothing more to do: further ticks call nothing.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if _, _, calls := ex.snapshot(); calls != 1 {
			t.Fatalf("%d calls, want 1", calls)
		}
	})
}

// TestDriverBoundsAndKicks: with 2 actions in flight at most, 6 blocks to
// repair never see more than 2 executor calls at once, and each completion
// starts the next without waiting for the next tick.
func TestDriverBoundsAndKicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var keys []block.Key
		for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
			keys = append(keys, keyOf(name))
		}
		d, ex := driverSetup(t, Options{DefaultBlockSize: 1, MaxInFlight: 2, MaxInFlightPerNode: 10}, 3, keys)
		ex.mu.Lock()
		ex.blocking = true
		ex.mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		if running, _, _ := ex.snapshot(); running != 2 {
			t.Fatalf("%d calls running, want 2", running)
		}
		start := time.Now()
		for range 4 {
			ex.release <- struct{}{}
			synctest.Wait()
		}
		if time.Since(start) != 0 {
			t.Fatal("completions waited for a tick")
		}
		for range 2 {
			ex.release <- struct{}{}
		}
		synctest.Wait()
		var st Stats
		d.Inspect(func(c *Core) { st = c.Stats() })
		if _, peak, calls := ex.snapshot(); peak != 2 || calls != 6 || st.InFlight != 0 || st.Copies != 6 {
			t.Fatalf("peak %d, calls %d, stats %+v", peak, calls, st)
		}
	})
}

func TestDriverFailureAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := keyOf("a")
		d, ex := driverSetup(t, Options{DefaultBlockSize: 1, RetryBackoff: 5 * time.Second}, 2, []block.Key{k})
		boom := errors.New("boom")
		ex.mu.Lock()
		ex.fail = func(block.Key) error { return boom }
		ex.mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		var st Stats
		d.Inspect(func(c *Core) { st = c.Stats() })
		if st.Failed != 1 || st.Parked != 1 {
			t.Fatalf("after a failed copy: %+v", st)
		}
		// The block waits out its backoff, then is tried again.
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if _, _, calls := ex.snapshot(); calls != 2 {
			t.Fatalf("%d calls after the backoff, want 2", calls)
		}
		// Close cancels a call in flight and waits for it.
		ex.mu.Lock()
		ex.fail, ex.blocking = nil, true
		ex.mu.Unlock()
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if running, _, _ := ex.snapshot(); running != 1 {
			t.Fatalf("%d calls running, want 1", running)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if running, _, _ := ex.snapshot(); running != 0 {
			t.Fatal("Close returned with a call running")
		}
		if err := d.Close(); !errors.Is(err, ErrClosed) {
			t.Fatalf("second Close: %v", err)
		}
		if err := d.Step(NodeDown{Node: 1}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Step after Close: %v", err)
		}
	})
}
