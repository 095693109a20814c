package index

import (
	"encoding/binary"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
)

// -global.large runs the global-index benchmarks at the sizes docs/cluster.md
// reports (1M and 10M blocks; a rebuild of 10 nodes x 1M blocks). They need
// about 6 GiB of memory and minutes; the default sizes run in seconds.
var globalLarge = flag.Bool("global.large", false, "run the global index benchmarks at 1M-10M blocks")

// benchKey is a cheap distinct key (SHA-256 of 10M counters takes seconds).
func benchKey(n uint64) block.Key {
	var k block.Key
	binary.LittleEndian.PutUint64(k[0:], n*0x9e3779b97f4a7c15)
	binary.LittleEndian.PutUint64(k[8:], n)
	binary.LittleEndian.PutUint64(k[16:], ^n)
	k[31] = 0x5a
	return k
}

var sinkMatches []NodeMatch

// BenchmarkGlobalLayouts builds each layout with `blocks` blocks spread
// round-robin over `nodes` nodes (one copy each, so a node's ids are spread
// evenly over the whole id space), reports its memory, then times Query of a
// 512-key chain whose keys are spread over the whole index: held in full by
// one node (a typical prefix) or by every node (a system prompt replicated
// everywhere: the worst case, every node walks all 512 keys).
//
// Memory: index-B/block is the layout's own accounting divided by blocks,
// heap-B/block the heap growth while building. Pairs equal blocks here (one
// copy each) apart from the chain's extra copies.
func BenchmarkGlobalLayouts(b *testing.B) {
	sizes := []int{100_000}
	if *globalLarge {
		sizes = []int{1_000_000, 10_000_000}
	}
	for _, l := range layouts {
		for _, blocks := range sizes {
			for _, nodes := range []int{16, 64} {
				name := fmt.Sprintf("%s/blocks=%d/nodes=%d", l.name, blocks, nodes)
				b.Run(name, func(b *testing.B) { benchLayout(b, l.new, blocks, nodes) })
			}
		}
	}
}

func benchLayout(b *testing.B, newLayout func() layout, blocks, nodes int) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := newLayout()
	full := make([][]Held, nodes)
	for i := range blocks {
		n := i % nodes
		full[n] = append(full[n], Held{Key: benchKey(uint64(i)), Tier: uint8(i / nodes % 2)})
	}
	// The chain: 512 keys of node 0 (i % nodes == 0), spread over the ids.
	chain := make([]block.Key, 512)
	step := blocks / nodes / len(chain)
	for j := range chain {
		chain[j] = full[0][j*step].Key
	}
	start := time.Now()
	for n := range full {
		x.replaceNode(uint32(n), full[n])
		full[n] = nil
	}
	build := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	mem := x.memoryBytes()
	heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	report := func(b *testing.B) {
		b.ReportMetric(float64(mem)/float64(blocks), "index-B/block")
		b.ReportMetric(heap/float64(blocks), "heap-B/block")
		b.ReportMetric(float64(build.Nanoseconds())/float64(blocks), "build-ns/block")
	}
	b.Run("holders=1", func(b *testing.B) {
		for b.Loop() {
			sinkMatches = x.query(chain)
		}
		if len(sinkMatches) != 1 || sinkMatches[0].PrefixLen != len(chain) {
			b.Fatalf("query: %+v", sinkMatches)
		}
		report(b)
	})
	cs := make([]Change, len(chain))
	for j, k := range chain {
		cs[j] = Change{Key: k, Tier: 0, Added: true}
	}
	for n := 1; n < nodes; n++ {
		x.apply(uint32(n), cs)
	}
	b.Run(fmt.Sprintf("holders=%d", nodes), func(b *testing.B) {
		for b.Loop() {
			sinkMatches = x.query(chain)
		}
		if len(sinkMatches) != nodes || sinkMatches[nodes-1].PrefixLen != len(chain) {
			b.Fatalf("query: %d matches", len(sinkMatches))
		}
		report(b)
	})
	runtime.KeepAlive(x)
}

// BenchmarkGlobalRebuild times what a new leader does: 10 nodes send their
// full state into an empty index, one after another ("seq") and all at once
// ("parallel", as after a leader change). ns/op is one whole rebuild.
func BenchmarkGlobalRebuild(b *testing.B) {
	perNode := 100_000
	if *globalLarge {
		perNode = 1_000_000
	}
	const nodes = 10
	full := make([][]Held, nodes)
	for n := range full {
		full[n] = make([]Held, perNode)
		for i := range full[n] {
			// Half the blocks are unique to the node, half shared with
			// the next node, as replicas.
			id := uint64(n*perNode + i)
			if i%2 == 1 {
				id = uint64(((n+1)%nodes)*perNode + i - 1)
			}
			full[n][i] = Held{Key: benchKey(id), Tier: uint8(i % 2)}
		}
	}
	for _, l := range layouts {
		for _, mode := range []string{"seq", "parallel"} {
			if l.name == "key-bitmaps" && mode == "parallel" {
				continue // one global lock per call: no different from seq
			}
			b.Run(fmt.Sprintf("%s/%s/nodes=%d/blocks=%d", l.name, mode, nodes, perNode), func(b *testing.B) {
				for b.Loop() {
					x := l.new()
					if mode == "seq" {
						for n := range full {
							x.replaceNode(uint32(n), full[n])
						}
					} else {
						var wg sync.WaitGroup
						for n := range full {
							wg.Go(func() { x.replaceNode(uint32(n), full[n]) })
						}
						wg.Wait()
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodes*perNode), "ns/held")
			})
		}
	}
}

// BenchmarkGlobalApply measures the event stream: batches of 64 add and
// remove events from 16 nodes against an index of 100,000 blocks.
func BenchmarkGlobalApply(b *testing.B) {
	g := NewGlobal(GlobalOptions{})
	const nodes, blocks = 16, 100_000
	for n := range nodes {
		var full []Held
		for i := n; i < blocks; i += nodes {
			full = append(full, Held{Key: benchKey(uint64(i))})
		}
		if err := g.ReplaceNode(uint32(n), full); err != nil {
			b.Fatal(err)
		}
	}
	batch := make([]Change, 64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for j := range batch {
			k := uint64(blocks + i*len(batch) + j)
			batch[j] = Change{Key: benchKey(k % (4 * blocks)), Tier: uint8(j % 2), Added: j%4 != 3}
		}
		if err := g.Apply(uint32(i%nodes), batch); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/event")
}

// BenchmarkGlobalReconnect times one node of ten resending its full state
// (unchanged) into a full index: a node that reconnects after a network
// blip. ns/op is one ReplaceNode.
func BenchmarkGlobalReconnect(b *testing.B) {
	perNode := 100_000
	if *globalLarge {
		perNode = 1_000_000
	}
	const nodes = 10
	full := make([][]Held, nodes)
	for n := range full {
		full[n] = make([]Held, perNode)
		for i := range full[n] {
			full[n][i] = Held{Key: benchKey(uint64(n*perNode + i)), Tier: uint8(i % 2)}
		}
	}
	for _, l := range layouts {
		b.Run(fmt.Sprintf("%s/nodes=%d/blocks=%d", l.name, nodes, perNode), func(b *testing.B) {
			x := l.new()
			for n := range full {
				x.replaceNode(uint32(n), full[n])
			}
			i := 0
			for b.Loop() {
				x.replaceNode(uint32(i%nodes), full[i%nodes])
				i++
			}
		})
	}
}
