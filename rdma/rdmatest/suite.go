package rdmatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/rdma"
)

// NewTransport returns a fresh, unstarted transport. The suite calls it once
// per engine and closes each engine it makes.
type NewTransport func(t testing.TB) rdma.Transport

// Token is the cluster token the suite's engines share.
const Token = "rdmatest-cluster-token"

// segSize is the size of the suite's segments: big enough for requests of
// many slices, small enough for a 2-core CI box.
const segSize = 4 << 20

// RunSuite runs the conformance suite.
func RunSuite(t *testing.T, newTransport NewTransport) {
	tests := []struct {
		name string
		f    func(*testing.T, NewTransport)
	}{
		{"RandomRanges", testRandomRanges},
		{"ConcurrentBatches", testConcurrentBatches},
		{"Bounds", testBounds},
		{"OpenErrors", testOpenErrors},
		{"BatchLifecycle", testBatchLifecycle},
		{"Deadline", testDeadline},
		{"UnregisterWaits", testUnregisterWaits},
		{"CloseEndsTransfers", testCloseEndsTransfers},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, newTransport) })
	}
}

// pair is a server engine with one shared segment and a client engine with
// one local segment, the remote segment opened.
type pair struct {
	server, client *rdma.Engine
	serverMem      []byte
	local          *rdma.Segment
	localMem       []byte
	remote         *rdma.RemoteSegment
	gate           *Gate
}

func newEngine(t testing.TB, tr rdma.Transport, opts rdma.Options) *rdma.Engine {
	t.Helper()
	if opts.ClusterToken == "" {
		opts.ClusterToken = Token
	}
	e, err := rdma.New(opts, tr)
	if err != nil {
		t.Fatalf("rdma.New: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return e
}

func newPair(t testing.TB, newTransport NewTransport, rng *rand.Rand) *pair {
	t.Helper()
	p := &pair{}
	p.server = newEngine(t, newTransport(t), rdma.Options{})
	sm, err := rdma.NewSharedMemory("rdmatest", segSize)
	if err != nil {
		t.Fatal(err)
	}
	p.serverMem = sm.Bytes()
	fill(rng, p.serverMem)
	if _, err := p.server.RegisterShared("kv", "cpu:0", sm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() }) // after the engine closes: cleanups run last-in first-out

	p.gate = NewGate(newTransport(t))
	p.client = newEngine(t, p.gate, rdma.Options{})
	p.localMem = make([]byte, segSize)
	fill(rng, p.localMem)
	if p.local, err = p.client.Register("buf", "cpu:0", p.localMem); err != nil {
		t.Fatal(err)
	}
	if p.remote, err = p.client.OpenSegment(t.Context(), p.server.Addr(), "kv"); err != nil {
		t.Fatalf("OpenSegment: %v", err)
	}
	if p.remote.Size() != segSize || p.remote.Name() != "kv" || p.remote.Location() != "cpu:0" {
		t.Fatalf("remote segment %s size %d location %s", p.remote.Name(), p.remote.Size(), p.remote.Location())
	}
	return p
}

func fill(rng *rand.Rand, b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

func newRand(t testing.TB) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed>>1))
}

// randomRange picks a range of up to maxLen bytes; lengths cluster around
// slice boundaries often enough to catch off-by-ones.
func randomRange(rng *rand.Rand, size, maxLen uint64) (off, n uint64) {
	switch rng.IntN(4) {
	case 0:
		n = 1 + rng.Uint64N(64)
	case 1:
		k := uint64(1) << (12 + rng.IntN(9)) // 4 KiB .. 1 MiB
		n = k + rng.Uint64N(3) - 1
	default:
		n = 1 + rng.Uint64N(maxLen)
	}
	n = min(n, size)
	off = rng.Uint64N(size - n + 1)
	return off, n
}

func run(t testing.TB, e *rdma.Engine, reqs ...rdma.Request) rdma.Status {
	t.Helper()
	b, err := e.AllocateBatch(len(reqs))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Submit(t.Context(), reqs...); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	st, err := b.Wait(t.Context())
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := b.Free(); err != nil {
		t.Fatalf("Free: %v", err)
	}
	return st
}

func testRandomRanges(t *testing.T, newTransport NewTransport) {
	rng := newRand(t)
	p := newPair(t, newTransport, rng)
	for i := range 40 {
		op := rdma.Read
		if i%2 == 1 {
			op = rdma.Write
		}
		loff, n := randomRange(rng, segSize, 1<<20)
		roff := rng.Uint64N(segSize - n + 1)
		st := run(t, p.client, rdma.Request{Op: op, Local: p.local, LocalOffset: loff, Remote: p.remote, RemoteOffset: roff, Length: n})
		if st.State != rdma.Completed || st.Err != nil || st.Transferred != n {
			t.Fatalf("%v of %d bytes: %+v", op, n, st)
		}
		local, remote := p.localMem[loff:loff+n], p.serverMem[roff:roff+n]
		if !bytes.Equal(local, remote) {
			t.Fatalf("%v of %d bytes local %d remote %d: bytes differ at %d", op, n, loff, roff, firstDiff(local, remote))
		}
		// Change the source so the next transfer cannot pass by accident.
		fill(rng, p.localMem[loff:loff+n])
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// testConcurrentBatches runs many batches at once from several goroutines,
// reads and writes mixed, each goroutine on its own disjoint region.
func testConcurrentBatches(t *testing.T, newTransport NewTransport) {
	rng := newRand(t)
	p := newPair(t, newTransport, rng)
	const workers, rounds, perBatch = 8, 4, 8
	region := uint64(segSize / workers)
	chunk := region / perBatch
	want := make([]byte, segSize)
	copy(want, p.serverMem)
	seeds := make([]uint64, workers)
	for i := range seeds {
		seeds[i] = rng.Uint64()
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seeds[w], 0))
			base := uint64(w) * region
			for round := range rounds {
				op := rdma.Write
				if round%2 == 1 {
					op = rdma.Read
				}
				if op == rdma.Write {
					fill(rng, p.localMem[base:base+region])
				} else {
					clear(p.localMem[base : base+region])
				}
				b, err := p.client.AllocateBatch(perBatch)
				if err != nil {
					errs <- err
					return
				}
				reqs := make([]rdma.Request, perBatch)
				for i := range reqs {
					off := base + uint64(i)*chunk
					reqs[i] = rdma.Request{Op: op, Local: p.local, LocalOffset: off, Remote: p.remote, RemoteOffset: off, Length: chunk}
				}
				if _, err := b.Submit(t.Context(), reqs...); err != nil {
					errs <- err
					return
				}
				st, err := b.Wait(t.Context())
				if err == nil && st.State != rdma.Completed {
					err = fmt.Errorf("batch %s: %w", st.State, st.Err)
				}
				if err == nil && st.Transferred != region {
					err = fmt.Errorf("batch moved %d bytes, want %d", st.Transferred, region)
				}
				if err == nil {
					err = b.Free()
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, round, err)
					return
				}
				if op == rdma.Write {
					copy(want[base:base+region], p.localMem[base:base+region])
				} else if !bytes.Equal(p.localMem[base:base+region], want[base:base+region]) {
					errs <- fmt.Errorf("worker %d round %d: read back different bytes", w, round)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !bytes.Equal(p.serverMem, want) {
		t.Errorf("server memory differs at %d", firstDiff(p.serverMem, want))
	}
}

func testBounds(t *testing.T, newTransport NewTransport) {
	rng := newRand(t)
	p := newPair(t, newTransport, rng)
	other := newEngine(t, newTransport(t), rdma.Options{})
	foreign, err := other.Register("foreign", "cpu:0", make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	const size = segSize
	before := append([]byte(nil), p.serverMem...)
	for _, tc := range []struct {
		name string
		req  rdma.Request
		want error
	}{
		{"local past end", rdma.Request{Op: rdma.Read, LocalOffset: size - 10, Length: 11}, rdma.ErrOutOfRange},
		{"remote past end", rdma.Request{Op: rdma.Write, RemoteOffset: size - 10, Length: 11}, rdma.ErrOutOfRange},
		{"local offset beyond", rdma.Request{Op: rdma.Read, LocalOffset: size + 1, Length: 1}, rdma.ErrOutOfRange},
		{"remote offset overflows", rdma.Request{Op: rdma.Write, RemoteOffset: math.MaxUint64, Length: 2}, rdma.ErrOutOfRange},
		{"length overflows", rdma.Request{Op: rdma.Read, LocalOffset: 1, Length: math.MaxUint64}, rdma.ErrOutOfRange},
		{"too long", rdma.Request{Op: rdma.Write, Length: size + 1}, rdma.ErrOutOfRange},
		{"zero length", rdma.Request{Op: rdma.Read, Length: 0}, rdma.ErrInvalidRequest},
		{"unknown op", rdma.Request{Op: 9, Length: 1}, rdma.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Local, req.Remote = p.local, p.remote
			b, err := p.client.AllocateBatch(2)
			if err != nil {
				t.Fatal(err)
			}
			ok := rdma.Request{Op: rdma.Read, Local: p.local, Remote: p.remote, Length: 1}
			if _, err := b.Submit(t.Context(), ok, req); !errors.Is(err, tc.want) {
				t.Fatalf("Submit = %v, want %v", err, tc.want)
			}
			if b.Len() != 0 {
				t.Fatalf("a batch with an invalid request took %d requests", b.Len())
			}
			if err := b.Free(); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("nil and foreign segments", func(t *testing.T) {
		b, err := p.client.AllocateBatch(1)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free()
		for _, req := range []rdma.Request{
			{Op: rdma.Read, Remote: p.remote, Length: 1},
			{Op: rdma.Read, Local: p.local, Length: 1},
			{Op: rdma.Read, Local: foreign, Remote: p.remote, Length: 1},
		} {
			if _, err := b.Submit(t.Context(), req); !errors.Is(err, rdma.ErrInvalidRequest) {
				t.Errorf("Submit(%+v) = %v, want ErrInvalidRequest", req, err)
			}
		}
	})
	if !bytes.Equal(before, p.serverMem) {
		t.Fatal("a refused request changed server memory")
	}
	// The engine still works after all that.
	st := run(t, p.client, rdma.Request{Op: rdma.Read, Local: p.local, Remote: p.remote, Length: 4096})
	if st.State != rdma.Completed || !bytes.Equal(p.localMem[:4096], p.serverMem[:4096]) {
		t.Fatalf("transfer after refusals: %+v", st)
	}
}

func testOpenErrors(t *testing.T, newTransport NewTransport) {
	rng := newRand(t)
	p := newPair(t, newTransport, rng)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := p.client.OpenSegment(ctx, p.server.Addr(), "missing"); !errors.Is(err, rdma.ErrSegmentNotFound) {
		t.Errorf("open missing segment: %v, want ErrSegmentNotFound", err)
	}
	if _, err := p.client.OpenSegment(ctx, p.server.Addr(), ""); !errors.Is(err, rdma.ErrInvalidRequest) {
		t.Errorf("open empty name: %v, want ErrInvalidRequest", err)
	}
	intruder := newEngine(t, newTransport(t), rdma.Options{ClusterToken: "wrong-token"})
	if _, err := intruder.OpenSegment(ctx, p.server.Addr(), "kv"); !errors.Is(err, rdma.ErrAuth) {
		t.Errorf("open with wrong token: %v, want ErrAuth", err)
	}
	dead := newEngine(t, newTransport(t), rdma.Options{})
	addr := dead.Addr()
	dead.Close()
	start := time.Now()
	if _, err := p.client.OpenSegment(ctx, addr, "kv"); err == nil {
		t.Error("open on a closed peer succeeded")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("open on a closed peer took %v", el)
	}
}

func testBatchLifecycle(t *testing.T, newTransport NewTransport) {
	rng := newRand(t)
	p := newPair(t, newTransport, rng)
	if _, err := p.client.AllocateBatch(0); !errors.Is(err, rdma.ErrInvalidRequest) {
		t.Errorf("AllocateBatch(0) = %v", err)
	}
	b, err := p.client.AllocateBatch(2)
	if err != nil {
		t.Fatal(err)
	}
	if st := b.BatchStatus(); st.State != rdma.Completed || st.Transferred != 0 {
		t.Errorf("empty batch status %+v", st)
	}
	req := func(off uint64) rdma.Request {
		return rdma.Request{Op: rdma.Read, Local: p.local, LocalOffset: off, Remote: p.remote, RemoteOffset: off, Length: 1 << 20}
	}
	p.gate.Hold()
	first, err := b.Submit(t.Context(), req(0))
	if err != nil || first != 0 {
		t.Fatalf("Submit = %d, %v", first, err)
	}
	if st, _ := b.Status(0); st.State != rdma.Pending {
		t.Errorf("held request is %v", st.State)
	}
	if err := b.Free(); !errors.Is(err, rdma.ErrBusy) {
		t.Errorf("Free with a pending request = %v, want ErrBusy", err)
	}
	if _, err := b.Submit(t.Context(), req(1<<20), req(2<<20)); !errors.Is(err, rdma.ErrBatchFull) {
		t.Errorf("Submit past capacity = %v, want ErrBatchFull", err)
	}
	first, err = b.Submit(t.Context(), req(1<<20))
	if err != nil || first != 1 {
		t.Fatalf("second Submit = %d, %v", first, err)
	}
	if _, err := b.Status(2); !errors.Is(err, rdma.ErrInvalidRequest) {
		t.Errorf("Status(2) = %v", err)
	}
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait while held = %v, want deadline", err)
	}
	p.gate.Release()
	st, err := b.Wait(t.Context())
	if err != nil || st.State != rdma.Completed || st.Transferred != 2<<20 || st.Elapsed <= 0 {
		t.Fatalf("Wait = %+v, %v", st, err)
	}
	for i := range 2 {
		st, err := b.Status(i)
		if err != nil || st.State != rdma.Completed || st.Transferred != 1<<20 {
			t.Errorf("Status(%d) = %+v, %v", i, st, err)
		}
	}
	if !bytes.Equal(p.localMem[:2<<20], p.serverMem[:2<<20]) {
		t.Error("bytes differ")
	}
	if err := b.Free(); err != nil {
		t.Fatalf("Free = %v", err)
	}
	if _, err := b.Submit(t.Context(), req(0)); !errors.Is(err, rdma.ErrClosed) {
		t.Errorf("Submit after Free = %v, want ErrClosed", err)
	}
}

// testDeadline holds every transfer at the gate: the batch must report
// Timeout by its deadline instead of hanging.
func testDeadline(t *testing.T, newTransport NewTransport) {
	rng := newRand(t)
	p := newPair(t, newTransport, rng)
	p.gate.Hold()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	b, err := p.client.AllocateBatch(4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		off := uint64(i) << 20
		if _, err := b.Submit(ctx, rdma.Request{Op: rdma.Write, Local: p.local, LocalOffset: off, Remote: p.remote, RemoteOffset: off, Length: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := b.Wait(t.Context())
	if err != nil || st.State != rdma.Timeout || !errors.Is(st.Err, rdma.ErrTimeout) {
		t.Fatalf("Wait = %+v, %v; want Timeout", st, err)
	}
	if st.Elapsed > 5*time.Second {
		t.Errorf("timed out after %v", st.Elapsed)
	}
	p.gate.Release()
	// A fresh context works again.
	if st := run(t, p.client, rdma.Request{Op: rdma.Read, Local: p.local, Remote: p.remote, Length: 1 << 20}); st.State != rdma.Completed {
		t.Fatalf("after timeout: %+v", st)
	}
}

func testUnregisterWaits(t *testing.T, newTransport NewTransport) {
	rng := newRand(t)
	p := newPair(t, newTransport, rng)
	p.gate.Hold()
	b, err := p.client.AllocateBatch(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Submit(t.Context(), rdma.Request{Op: rdma.Read, Local: p.local, Remote: p.remote, Length: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := p.client.Unregister(short, "buf"); !errors.Is(err, rdma.ErrBusy) {
		t.Fatalf("Unregister with a transfer in flight = %v, want ErrBusy", err)
	}
	// Refused at once for new requests, while the old one still runs.
	b2, _ := p.client.AllocateBatch(1)
	if _, err := b2.Submit(t.Context(), rdma.Request{Op: rdma.Read, Local: p.local, Remote: p.remote, Length: 1}); !errors.Is(err, rdma.ErrSegmentNotFound) {
		t.Errorf("Submit on an unregistered segment = %v", err)
	}
	b2.Free()
	p.gate.Release()
	if st, err := b.Wait(t.Context()); err != nil || st.State != rdma.Completed {
		t.Fatalf("Wait = %+v, %v", st, err)
	}
	if !bytes.Equal(p.localMem[:1<<20], p.serverMem[:1<<20]) {
		t.Error("bytes differ")
	}
	if err := p.client.Unregister(t.Context(), "buf"); err != nil {
		t.Fatalf("second Unregister = %v", err)
	}
	if err := p.client.Unregister(t.Context(), "buf"); !errors.Is(err, rdma.ErrSegmentNotFound) {
		t.Errorf("third Unregister = %v", err)
	}
	// The remote side: a segment the server withdrew cannot be opened.
	if err := p.server.Unregister(t.Context(), "kv"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.client.OpenSegment(t.Context(), p.server.Addr(), "kv"); !errors.Is(err, rdma.ErrSegmentNotFound) {
		t.Errorf("open after unregister = %v", err)
	}
}

func testCloseEndsTransfers(t *testing.T, newTransport NewTransport) {
	rng := newRand(t)
	p := newPair(t, newTransport, rng)
	p.gate.Hold()
	b, err := p.client.AllocateBatch(2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Submit(t.Context(), rdma.Request{Op: rdma.Read, Local: p.local, Remote: p.remote, Length: 1 << 20},
		rdma.Request{Op: rdma.Write, Local: p.local, Remote: p.remote, RemoteOffset: 1 << 20, Length: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := p.client.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	st, err := b.Wait(t.Context())
	if err != nil || st.State != rdma.Failed || !errors.Is(st.Err, rdma.ErrClosed) {
		t.Fatalf("after Close: %+v, %v; want Failed with ErrClosed", st, err)
	}
	if _, err := p.client.AllocateBatch(1); !errors.Is(err, rdma.ErrClosed) {
		t.Errorf("AllocateBatch after Close = %v", err)
	}
	if _, err := p.client.Register("x", "cpu:0", make([]byte, 1)); !errors.Is(err, rdma.ErrClosed) {
		t.Errorf("Register after Close = %v", err)
	}
	if _, err := b.Submit(t.Context(), rdma.Request{Op: rdma.Read, Local: p.local, Remote: p.remote, Length: 1}); !errors.Is(err, rdma.ErrClosed) {
		t.Errorf("Submit after Close = %v", err)
	}
}
