package index

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/yuebing/yuebing/block"
)

var sinkMatch Match

// BenchmarkPrefixMatch matches a fully cached 512-block chain against an
// index of n entries (the chain's keys among them) and reports the index's
// bytes per entry, by its own accounting and by heap growth.
func BenchmarkPrefixMatch(b *testing.B) {
	for _, n := range []int{100_000, 10_000_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ix := New(Options{})
			for i := range n {
				ix.Set(keyN(uint64(i)), Entry{Tiers: 1, Size: 1 << 20})
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			chain := make([]block.Key, 512)
			for i := range chain {
				chain[i] = keyN(uint64(i * (n / 512)))
			}
			for b.Loop() {
				sinkMatch = ix.PrefixMatch(chain)
			}
			b.ReportMetric(float64(ix.MemoryBytes())/float64(n), "index-B/entry")
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-B/entry")
			if sinkMatch.Len != 512 {
				b.Fatalf("matched %d of 512", sinkMatch.Len)
			}
			runtime.KeepAlive(ix)
		})
	}
}

func BenchmarkGet(b *testing.B) {
	ix := New(Options{})
	keys := make([]block.Key, 1<<16)
	for i := range keys {
		keys[i] = keyN(uint64(i))
		ix.Set(keys[i], Entry{Tiers: 1})
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_, ok := ix.Get(keys[i&(len(keys)-1)])
			if !ok {
				b.Fatal("missing")
			}
			i++
		}
	})
}

func BenchmarkSet(b *testing.B) {
	ix := New(Options{})
	keys := make([]block.Key, 1<<20)
	for i := range keys {
		keys[i] = keyN(uint64(i))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ix.Set(keys[i&(len(keys)-1)], Entry{Tiers: 1})
		i++
	}
}
