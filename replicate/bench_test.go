package replicate

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// BenchmarkHits measures the cost of one hit, reported by nodes in batches
// of 256: over a million keys with Zipf-distributed popularity (s=1.1), so
// most hits land in the sketch and the popular ones in their windows.
func BenchmarkHits(b *testing.B) {
	const nkeys, batch = 1 << 20, 256
	keys := make([]block.Key, nkeys)
	for i := range keys {
		keys[i] = keyOfInt(uint64(i))
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, nkeys-1)
	c := mustCore(b, Options{}, nil)
	now := epoch
	for n := range 16 {
		if err := c.Step(now, NodeUp{Node: uint32(n), Capacity: 1 << 40, Free: 1 << 40}); err != nil {
			b.Fatal(err)
		}
	}
	ev := Hits{Keys: make([]block.Key, batch)}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for j := range ev.Keys {
			ev.Keys[j] = keys[z.Uint64()]
		}
		ev.Node = uint32(i % 16)
		now = now.Add(time.Millisecond)
		if err := c.Step(now, ev); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/hit")
	b.ReportMetric(float64(c.Stats().Hot), "windows")
}

// BenchmarkTick measures a Tick of a core tracking `tracked` blocks with
// desired count 2 and nothing to do: the scan of ScanPerTick (4096) blocks
// that every tick pays.
func BenchmarkTick(b *testing.B) {
	for _, tracked := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("tracked=%d", tracked), func(b *testing.B) {
			g := index.NewGlobal(index.GlobalOptions{})
			c := mustCore(b, Options{}, g)
			now := epoch
			for n := range 16 {
				if err := c.Step(now, NodeUp{Node: uint32(n), Capacity: 1 << 40, Free: 1 << 40}); err != nil {
					b.Fatal(err)
				}
			}
			for i := range tracked {
				k := keyOfInt(uint64(i))
				for _, n := range []uint32{uint32(i % 16), uint32((i + 1) % 16)} {
					if err := g.Apply(n, []index.Change{{Key: k, Added: true}}); err != nil {
						b.Fatal(err)
					}
				}
				if err := c.Step(now, SetReplicas{Key: k, Count: 2}); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				now = now.Add(time.Second)
				if acts := c.Tick(now); len(acts) != 0 {
					b.Fatalf("%d actions", len(acts))
				}
			}
		})
	}
}

// BenchmarkNodeDown measures the NodeDown of one of 16 nodes in a core
// tracking 100,000 blocks of desired count 2 (12,500 of them on that node)
// and the Tick that starts their repair; ns/op is both. The surviving copies
// sit on two nodes (2 and 4), so the per-node bound lets the first tick start
// only a handful of copies.
func BenchmarkNodeDown(b *testing.B) {
	const tracked, nodes = 100_000, 16
	g := index.NewGlobal(index.GlobalOptions{})
	keys := make([]block.Key, tracked)
	for i := range keys {
		keys[i] = keyOfInt(uint64(i))
		for _, n := range []uint32{uint32(i % nodes), uint32((i + 1) % nodes)} {
			if err := g.Apply(n, []index.Change{{Key: keys[i], Added: true}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for b.Loop() {
		b.StopTimer()
		c := mustCore(b, Options{}, g)
		now := epoch
		for n := range nodes {
			if err := c.Step(now, NodeUp{Node: uint32(n), Capacity: 1 << 40, Free: 1 << 40}); err != nil {
				b.Fatal(err)
			}
		}
		for _, k := range keys {
			if err := c.Step(now, SetReplicas{Key: k, Count: 2}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if err := c.Step(now, NodeDown{Node: 3}); err != nil {
			b.Fatal(err)
		}
		// The survivors are on nodes 2 and 4, and each serves at most
		// MaxInFlightPerNode (4) copies at once.
		if acts := c.Tick(now); len(acts) < 4 || len(acts) > 8 {
			b.Fatalf("%d actions, want 4 to 8", len(acts))
		}
	}
}
