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
	"github.com/yuebing/yuebing/scheduler"
)

// Event rates of the benchmarks: none; every engine publishing a batch
// every 2 ms on average (a busy engine: a prefill or an eviction each
// step), a publisher the machine leaves behind catching up; and each
// publishing as fast as the machine lets it, with a pause of 100 µs.
type eventRate struct {
	name  string
	every time.Duration // 0: no events
	pause bool          // pause between batches instead of keeping a rate
}

var eventRates = []eventRate{
	{"quiet", 0, false},
	{"every-2ms", 2 * time.Millisecond, false},
	{"flat-out", 100 * time.Microsecond, true},
}

// BenchmarkDecideWithEvents measures routing decisions per second on 16
// engines for requests already read and keyed (Router.Decide: each
// engine's cached prefix, Algorithm 1, the speculative entry, then Done),
// quiet and while each engine streams KV events over real ZMQ sockets.
func BenchmarkDecideWithEvents(b *testing.B) {
	for _, rate := range eventRates {
		b.Run(rate.name, func(b *testing.B) { benchRouter(b, rate, true) })
	}
}

// BenchmarkPlaceWithEvents is BenchmarkDecideWithEvents for the whole
// decision (Router.Place): parsing a token-id prompt of 2,048 tokens and
// chaining its 128 keys too.
func BenchmarkPlaceWithEvents(b *testing.B) {
	for _, rate := range eventRates {
		b.Run(rate.name, func(b *testing.B) { benchRouter(b, rate, false) })
	}
}

func benchRouter(b *testing.B, rate eventRate, decideOnly bool) {
	every := rate.every
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
	// Probes are off (no engine answers /metrics here); an empty queue
	// report every 10 ms stands in for them, so queue estimates stay those
	// of a served load and no decision is rejected.
	wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, e := range r.order {
				_ = r.d.Heartbeat(e.ID, scheduler.Load{})
			}
		}
	})
	var published atomic.Int64
	// Each engine stores a chain of 8 blocks per batch and evicts the
	// chain it stored 64 batches before, as an engine with a full cache of
	// 512 blocks does. The chains are made beforehand (256 per engine, in
	// turn), so the publishers spend their time publishing.
	const chains, live = 256, 64
	for i, p := range pubs {
		if every == 0 {
			break
		}
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		var stored [chains]kvevents.Event
		for c := range stored {
			ts := make([]uint32, 8*testBS)
			for j := range ts {
				ts[j] = rng.Uint32N(150000) // a vocabulary's ids
			}
			keys, _ := block.ChainKeys(testNS, testBS, ts)
			hs := make([]kvevents.Hash, len(keys))
			for j := range keys {
				hs[j] = kvevents.HashBytes(keys[j][:])
			}
			stored[c] = kvevents.Event{Kind: kvevents.BlockStored, Hashes: hs, Tokens: ts, BlockSize: testBS}
		}
		wg.Go(func() {
			t := time.NewTicker(every)
			defer t.Stop()
			t0 := time.Now()
			for n := 0; ctx.Err() == nil; n++ {
				switch {
				case rate.pause:
					time.Sleep(every)
				case n >= int(time.Since(t0)/every):
					// Ahead of the rate: wait. A publisher the machine
					// left behind catches up instead.
					select {
					case <-ctx.Done():
						return
					case <-t.C:
					}
				}
				evs := []kvevents.Event{stored[n%chains]}
				if n >= live {
					evs = append(evs, kvevents.Event{Kind: kvevents.BlockRemoved, Hashes: stored[(n-live)%chains].Hashes})
				}
				if p.Publish(evs) == nil {
					published.Add(1)
				}
			}
		})
	}
	bodies := make([][]byte, 64)
	prepared := make([]Prepared, len(bodies))
	for i := range bodies {
		bodies[i] = body(b, prompt(i, 128), false)
		if prepared[i], err = r.Prepare(Completions, bodies[i]); err != nil {
			b.Fatal(err)
		}
	}
	applied := func() int64 {
		var n int64
		for _, e := range r.order {
			n += e.stats.Batches.Load()
		}
		return n
	}
	// Let the event streams reach their pace.
	time.Sleep(100 * time.Millisecond)
	applied0 := applied()
	published0 := published.Load()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) % int64(len(bodies))
			var (
				p   *Plan
				err error
			)
			if decideOnly {
				p, err = r.Decide(ctx, prepared[i])
			} else {
				p, err = r.Place(ctx, Completions, bodies[i])
			}
			if err != nil {
				b.Error(err)
				return
			}
			r.Done(p)
		}
	})
	el := time.Since(start).Seconds()
	cpu := cpuTime() - cpu0
	b.StopTimer()
	var gaps int64
	for _, e := range r.order {
		gaps += e.stats.Gaps.Load()
	}
	batches := applied() - applied0
	b.ReportMetric(float64(b.N)/el, "decisions/s")
	b.ReportMetric(float64(published.Load()-published0)/el, "published-batches/s")
	b.ReportMetric(float64(batches)/el, "batches/s")
	// A subscriber that falls behind loses messages at its socket's
	// high-water mark and replays them: gaps say the rate was too much.
	b.ReportMetric(float64(gaps), "gaps")
	// On a shared machine the wall clock measures the neighbours: cpus is
	// how much of the machine the process got, and its CPU time per
	// decision (event handling and publishing included) is what the
	// router costs.
	b.ReportMetric(cpu.Seconds()/el, "cpus")
	b.ReportMetric(cpu.Seconds()*1e6/float64(b.N), "cpu-µs/decision")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
