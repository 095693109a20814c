package dram

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// The DRAM benchmarks pair each tier operation with copy() of the same bytes
// over memory of the same kind (an anonymous mapping with huge pages, the
// size of the arena), so `go test -bench` shows both in one run.

const benchArena = 256 << 20

var benchSizes = []int{64 << 10, 1 << 20, 16 << 20}

func benchRegion(b *testing.B) []byte {
	r, err := unix.Mmap(-1, 0, benchArena, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	unix.Madvise(r, unix.MADV_HUGEPAGE)
	for i := 0; i < len(r); i += 4096 {
		r[i] = 1
	}
	b.Cleanup(func() { unix.Munmap(r) })
	return r
}

func fullTier(b *testing.B, size int, eager bool) *DRAM {
	d, err := New(Options{Capacity: benchArena, MaxBlockSize: int64(size), EagerChecksum: eager})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	v := tiertest.Value(tiertest.Key(0), size)
	for i := 0; i < benchArena/size; i++ {
		d.Put(b.Context(), tiertest.Key(1<<30+i), v, tier.PutOptions{})
	}
	return d
}

func BenchmarkPut(b *testing.B) {
	for _, size := range benchSizes {
		src := tiertest.Value(tiertest.Key(1), size)
		for _, eager := range []bool{false, true} {
			b.Run(fmt.Sprintf("size=%d/eager=%v", size, eager), func(b *testing.B) {
				d := fullTier(b, size, eager)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if err := d.Put(b.Context(), tiertest.Key(i), src, tier.PutOptions{}); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
		b.Run(fmt.Sprintf("size=%d/baseline=copy", size), func(b *testing.B) {
			r := benchRegion(b)
			b.SetBytes(int64(size))
			slots := benchArena / size
			i := 0
			for b.Loop() {
				off := i % slots * size
				copy(r[off:off+size], src)
				i++
			}
		})
	}
}

func BenchmarkGet(b *testing.B) {
	for _, size := range benchSizes {
		buf := make([]byte, size)
		n := benchArena/size - 1
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			d, _ := New(Options{Capacity: benchArena, MaxBlockSize: int64(size)})
			defer d.Close()
			v := tiertest.Value(tiertest.Key(0), size)
			for i := range n {
				d.Put(b.Context(), tiertest.Key(i), v, tier.PutOptions{})
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				h, err := d.Get(b.Context(), tiertest.Key(i%n))
				if err != nil {
					b.Fatal(err)
				}
				copy(buf, h.Bytes())
				h.Release()
				i++
			}
		})
		b.Run(fmt.Sprintf("size=%d/baseline=copy", size), func(b *testing.B) {
			r := benchRegion(b)
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				off := i % n * size
				copy(buf, r[off:off+size])
				i++
			}
		})
	}
}

// BenchmarkGetParallel reads from every core at once: the tier's one mutex
// is held for a map lookup per read, so it must not be what limits them.
func BenchmarkGetParallel(b *testing.B) {
	const size = 64 << 10
	d, _ := New(Options{Capacity: benchArena})
	defer d.Close()
	n := benchArena/size - 1
	v := tiertest.Value(tiertest.Key(0), size)
	for i := range n {
		d.Put(b.Context(), tiertest.Key(i), v, tier.PutOptions{})
	}
	b.SetBytes(size)
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, size)
		i := 0
		for pb.Next() {
			h, err := d.Get(b.Context(), tiertest.Key(i%n))
			if err != nil {
				b.Fatal(err)
			}
			copy(buf, h.Bytes())
			h.Release()
			i++
		}
	})
}
