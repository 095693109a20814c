package tcp

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/yuebing/yuebing/rdma"
)

// rawGBps measures the baseline in the same run: one TCP connection over
// loopback moving n bytes in chunk-sized writes, read with io.ReadFull.
func rawGBps(b *testing.B, n, chunk int) float64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan time.Duration)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- 0
			return
		}
		defer nc.Close()
		buf := make([]byte, chunk)
		start := time.Now()
		for got := 0; got < n; got += chunk {
			if _, err := io.ReadFull(nc, buf); err != nil {
				break
			}
		}
		done <- time.Since(start)
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	buf := make([]byte, chunk)
	for sent := 0; sent < n; sent += chunk {
		if _, err := nc.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / (<-done).Seconds() / 1e9
}

// BenchmarkTransfer moves batches of 16 requests of 1 MiB over 4 loopback
// paths and reports GB/s and the ratio to one raw TCP stream measured in
// the same run (x_raw). Compare runs with benchstat.
func BenchmarkTransfer(b *testing.B) {
	const reqs, block, paths = 16, 1 << 20, 4
	for _, op := range []rdma.Op{rdma.Read, rdma.Write} {
		for _, slice := range []int{64 << 10, 256 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("%v/slice=%dKiB", op, slice>>10), func(b *testing.B) {
				server := newEngine(b, newTransport(b, Options{Topology: loopbackTopology(61, paths)}))
				client := newEngine(b, newTransport(b, Options{Topology: loopbackTopology(71, paths), SliceSize: slice}))
				size := reqs * block
				if _, err := server.Register("kv", "cpu:0", make([]byte, size)); err != nil {
					b.Fatal(err)
				}
				local, err := client.Register("buf", "cpu:0", make([]byte, size))
				if err != nil {
					b.Fatal(err)
				}
				remote, err := client.OpenSegment(b.Context(), server.Addr(), "kv")
				if err != nil {
					b.Fatal(err)
				}
				batch := make([]rdma.Request, reqs)
				for i := range batch {
					off := uint64(i * block)
					batch[i] = rdma.Request{Op: op, Local: local, LocalOffset: off, Remote: remote, RemoteOffset: off, Length: block}
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
				run() // dial the paths
				raw := rawGBps(b, 64*size/16, block)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for b.Loop() {
					run()
				}
				gbps := float64(b.N) * float64(size) / time.Since(start).Seconds() / 1e9
				b.ReportMetric(gbps, "GB/s")
				b.ReportMetric(gbps/raw, "x_raw")
			})
		}
	}
}
