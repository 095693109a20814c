package tier_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
)

// BenchmarkHierarchyPut is the cost of the hierarchy's put path (the
// index, the key lock, the per-key put guard) over a DRAM put, against the
// DRAM tier's put alone moving the same bytes in the same run. Puts are of
// new 64 KiB keys into a 64 MiB arena, so they evict; evicted blocks are
// dropped (no SSD tier in the way of the measurement).
func BenchmarkHierarchyPut(b *testing.B) {
	const size = 64 << 10
	value := make([]byte, size)
	newDRAM := func(b *testing.B) *dram.DRAM {
		d, err := dram.New(dram.Options{Capacity: 64 << 20})
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	run := func(b *testing.B, put func(context.Context, block.Key) error) {
		var n atomic.Uint64
		b.SetBytes(size)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				i := n.Add(1)
				var k block.Key
				for j := range 8 {
					k[j] = byte(i >> (8 * j))
				}
				k[8] = 1
				if err := put(ctx, k); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("dram", func(b *testing.B) {
		d := newDRAM(b)
		defer d.Close()
		run(b, func(ctx context.Context, k block.Key) error { return d.Put(ctx, k, value, tier.PutOptions{}) })
	})
	b.Run("hierarchy", func(b *testing.B) {
		h, err := tier.NewHierarchy([]tier.Tier{newDRAM(b)}, tier.HierarchyOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		run(b, func(ctx context.Context, k block.Key) error {
			_, err := h.Put(ctx, k, value, tier.PutOptions{})
			return err
		})
	})
}
