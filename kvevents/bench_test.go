package kvevents

import (
	"context"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
)

// BenchmarkDecodeAndMap measures what a subscriber spends on one batch
// once it has the message: decoding it and keying its blocks. The batch is
// a busy engine's step: a chain of 8 blocks of 16 tokens stored (32-byte
// hashes, as vLLM's sha256 hashing sends) and the 8 blocks of the chain
// stored 64 batches before removed.
func BenchmarkDecodeAndMap(b *testing.B) {
	const chains, live = 256, 64
	rng := rand.New(rand.NewPCG(1, 2))
	payloads := make([][]byte, chains)
	stored := make([][]Hash, chains)
	for c := range chains {
		ts := make([]uint32, 8*16)
		for j := range ts {
			ts[j] = rng.Uint32N(150000) // a vocabulary's ids
		}
		keys, _ := block.ChainKeys("t/m", 16, ts)
		for _, k := range keys {
			stored[c] = append(stored[c], HashBytes(k[:]))
		}
		evs := []Event{{Kind: BlockStored, Hashes: stored[c], Tokens: ts, BlockSize: 16}}
		if c >= live {
			evs = append(evs, Event{Kind: BlockRemoved, Hashes: stored[c-live]})
		}
		p, err := AppendBatch(nil, Batch{TS: 1, Events: evs})
		if err != nil {
			b.Fatal(err)
		}
		payloads[c] = p
	}
	m, err := NewMapper("t/m", 16, 1<<20, nil)
	if err != nil {
		b.Fatal(err)
	}
	var u Update
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := payloads[i%chains]
		i++
		if i%chains == 0 {
			m.Reset() // the chains come round again: start from a clean cache
		}
		bt, err := DecodeBatch(p, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		u.Changes = u.Changes[:0]
		m.Apply(bt, &u)
	}
}

// BenchmarkEventPath measures one batch end to end in one process: the
// publisher encodes and sends it over real ZMQ on loopback, the
// subscriber receives, decodes and keys it. It reports the process's CPU
// time per batch, both ends included.
func BenchmarkEventPath(b *testing.B) {
	p, err := NewPublisher(PublisherOptions{Endpoint: "tcp://127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	s, err := NewSubscriber(Options{Engine: "e", Endpoint: p.Endpoint(), Namespace: "t/m", BlockSize: 16,
		Sink: sinkFunc(func(Update) {})})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for !s.Connected() {
		time.Sleep(time.Millisecond)
	}
	// The PUB socket drops what it sends before the subscription reaches
	// it: publish until one batch arrives.
	applied := &s.Stats().Batches
	batches := chainBatches(b, 256, 64)
	for applied.Load() == 0 {
		p.Publish(batches[0])
		time.Sleep(time.Millisecond)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := applied.Load()
	cpu0 := processCPU()
	for i := range b.N {
		if err := p.Publish(batches[i%len(batches)]); err != nil {
			b.Fatal(err)
		}
		// Stay within the sockets' queues: a batch published far ahead
		// of the subscriber would be dropped, not measured.
		for t0 := time.Now(); int64(i)-(applied.Load()-start) > 256; {
			if time.Since(t0) > 2*time.Second {
				b.Fatalf("batch %d: %d applied; the rest were lost (%d gaps)", i, applied.Load()-start, s.Stats().Gaps.Load())
			}
			time.Sleep(10 * time.Microsecond)
		}
	}
	last, idle := applied.Load(), time.Now()
	for applied.Load()-start < int64(b.N) {
		if n := applied.Load(); n != last {
			last, idle = n, time.Now()
		} else if time.Since(idle) > 2*time.Second {
			b.Fatalf("%d of %d batches applied; the rest were lost (%d gaps)", n-start, b.N, s.Stats().Gaps.Load())
		}
		time.Sleep(10 * time.Microsecond)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/1e3/float64(b.N), "cpu-µs/batch")
}

type sinkFunc func(Update)

func (f sinkFunc) Apply(u Update) { f(u) }

// chainBatches returns n batches of a busy engine's steps: each stores a
// chain of 8 blocks and removes the chain stored live batches before.
func chainBatches(b *testing.B, n, live int) [][]Event {
	rng := rand.New(rand.NewPCG(3, 4))
	out := make([][]Event, n)
	stored := make([][]Hash, n)
	for c := range n {
		ts := make([]uint32, 8*16)
		for j := range ts {
			ts[j] = rng.Uint32N(150000)
		}
		keys, _ := block.ChainKeys("t/m", 16, ts)
		for _, k := range keys {
			stored[c] = append(stored[c], HashBytes(k[:]))
		}
		out[c] = []Event{{Kind: BlockStored, Hashes: stored[c], Tokens: ts, BlockSize: 16}}
		if c >= live {
			out[c] = append(out[c], Event{Kind: BlockRemoved, Hashes: stored[c-live]})
		}
	}
	return out
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
