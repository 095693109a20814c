package router

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/kvevents"
)

var sinkPlan *Plan

// BenchmarkPlaceWithEvents measures routing decisions per second on 16
// engines, quiet and while each engine streams KV events (stores and evictions of
// 8-block chains) over real ZMQ sockets: parsing a token-id prompt of 2,048
// tokens, its 128 chained keys, Algorithm 1, and the speculative entry.
func BenchmarkPlaceWithEvents(b *testing.B) {
	b.Run("quiet", func(b *testing.B) { benchPlace(b, false) })
	b.Run("events", func(b *testing.B) { benchPlace(b, true) })
}

func benchPlace(b *testing.B, events bool) {
	const engines = 16
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cfg []Engine
	var pubs []*kvevents.Publisher
	for i := range engines {
		p, err := kvevents.NewPublisher(kvevents.PublisherOptions{Endpoint: "tcp://127.0.0.1:0", Replay: "tcp://127.0.0.1:0"})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		pubs = append(pubs, p)
		cfg = append(cfg, Engine{ID: fmt.Sprintf("e%d", i), URL: "http://127.0.0.1:1", Events: p.Endpoint(), Replay: p.ReplayEndpoint()})
	}
	r, err := New(Options{Model: testModel, Namespace: testNS, BlockSize: testBS, Engines: cfg, ProbeInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	defer wg.Wait()
	defer cancel()
	for _, e := range r.order {
		for !e.sub.Connected() {
			time.Sleep(time.Millisecond)
		}
	}
	// Each engine stores a chain of 8 blocks per batch and evicts the
	// chain it stored 64 batches before, as an engine with a full cache of
	// 512 blocks does.
	for i, p := range pubs {
		if !events {
			break
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			var ring [64][]kvevents.Hash
			for n := 0; ctx.Err() == nil; n++ {
				ts := make([]uint32, 8*testBS)
				for j := range ts {
					ts[j] = rng.Uint32()
				}
				keys, _ := block.ChainKeys(testNS, testBS, ts)
				hs := make([]kvevents.Hash, len(keys))
				for j := range keys {
					hs[j] = kvevents.HashBytes(keys[j][:])
				}
				evs := []kvevents.Event{{Kind: kvevents.BlockStored, Hashes: hs, Tokens: ts, BlockSize: testBS}}
				if old := ring[n%len(ring)]; old != nil {
					evs = append(evs, kvevents.Event{Kind: kvevents.BlockRemoved, Hashes: old})
				}
				ring[n%len(ring)] = hs
				p.Publish(evs)
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	bodies := make([][]byte, 64)
	for i := range bodies {
		bodies[i] = body(b, prompt(i, 128), false)
	}
	var applied0 int64
	for _, e := range r.order {
		applied0 += e.stats.Batches.Load()
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := r.Place(ctx, Completions, bodies[next.Add(1)%int64(len(bodies))])
			if err != nil {
				b.Error(err)
				return
			}
			r.Done(p)
			sinkPlan = p
		}
	})
	el := time.Since(start).Seconds()
	cpu := cpuTime() - cpu0
	b.StopTimer()
	var applied int64
	for _, e := range r.order {
		applied += e.stats.Batches.Load()
	}
	b.ReportMetric(float64(b.N)/el, "decisions/s")
	b.ReportMetric(float64(applied-applied0)/el, "batches/s")
	// On a shared machine the wall clock measures the neighbours; the
	// process's CPU time per decision (event handling and publishing
	// included) is what the router costs.
	b.ReportMetric(cpu.Seconds()*1e6/float64(b.N), "cpu-µs/decision")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
