package shm

import (
	"fmt"
	"testing"
	"time"

	"github.com/yuebing/yuebing/rdma"
)

// copyOnce is the baseline: copy() of the same blocks between two buffers
// as large as the segment.
func copyOnce(dst, src []byte, block int) {
	for off := 0; off < len(src); off += block {
		copy(dst[off:off+block], src[off:off+block])
	}
}

// BenchmarkTransfer moves batches of 16 requests through the shm transport
// and reports GB/s and the ratio to copy() (x_copy). Each iteration copies
// the same bytes once with copy() and once through the engine, timing them
// apart; ns/op covers both.
func BenchmarkTransfer(b *testing.B) {
	const reqs = 16
	for _, op := range []rdma.Op{rdma.Read, rdma.Write} {
		for _, block := range []int{64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("%v/block=%dKiB", op, block>>10), func(b *testing.B) {
				size := reqs * block
				server := newEngine(b, newTransport(b))
				sm, err := rdma.NewSharedMemory("bench", size)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { sm.Close() })
				if _, err := server.RegisterShared("kv", "cpu:0", sm); err != nil {
					b.Fatal(err)
				}
				client := newEngine(b, newTransport(b))
				local, _ := client.Register("buf", "cpu:0", make([]byte, size))
				remote, err := client.OpenSegment(b.Context(), server.Addr(), "kv")
				if err != nil {
					b.Fatal(err)
				}
				batch := make([]rdma.Request, reqs)
				for i := range batch {
					off := uint64(i * block)
					batch[i] = rdma.Request{Op: op, Local: local, LocalOffset: off, Remote: remote, RemoteOffset: off, Length: uint64(block)}
				}
				run := func() {
					bt, err := client.AllocateBatch(reqs)
					if err != nil {
						b.Fatal(err)
					}
					bt.Submit(b.Context(), batch...)
					if st, err := bt.Wait(b.Context()); err != nil || st.State != rdma.Completed {
						b.Fatalf("batch %+v %v", st, err)
					}
					bt.Free()
				}
				run()
				src, dst := make([]byte, size), make([]byte, size)
				copyOnce(dst, src, block) // fault the pages in
				b.SetBytes(int64(size))
				b.ReportAllocs()
				var copyTime, engineTime time.Duration
				for b.Loop() {
					start := time.Now()
					copyOnce(dst, src, block)
					mid := time.Now()
					run()
					copyTime += mid.Sub(start)
					engineTime += time.Since(mid)
				}
				gbps := float64(b.N) * float64(size) / engineTime.Seconds() / 1e9
				b.ReportMetric(gbps, "GB/s")
				b.ReportMetric(copyTime.Seconds()/engineTime.Seconds(), "x_copy")
			})
		}
	}
}
