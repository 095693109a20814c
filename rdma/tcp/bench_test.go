package tcp

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma"
)

// rawStream is the baseline: one TCP connection over loopback, kept open,
// moving bytes from a buffer as large as the benchmark's segment into
// another, chunk by chunk with io.ReadFull on the far side.
type rawStream struct {
	nc       net.Conn
	src, dst []byte
	chunk    int
	done     chan error
}

func newRawStream(b *testing.B, size, chunk int) *rawStream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	r := &rawStream{src: make([]byte, size), dst: make([]byte, size), chunk: chunk, done: make(chan error)}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	if r.nc, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		b.Fatal(err)
	}
	far := <-accepted
	b.Cleanup(func() { r.nc.Close(); far.Close() })
	go func() {
		for {
			var err error
			for off := 0; off < size && err == nil; off += chunk {
				_, err = io.ReadFull(far, r.dst[off:off+chunk])
			}
			r.done <- err
			if err != nil {
				return
			}
		}
	}()
	r.move(b) // fault the pages in
	return r
}

// move sends the whole buffer once and waits until it arrived.
func (r *rawStream) move(b *testing.B) {
	for off := 0; off < len(r.src); off += r.chunk {
		if _, err := r.nc.Write(r.src[off : off+r.chunk]); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-r.done; err != nil {
		b.Fatal(err)
	}
}

// againstRaw times run, which moves size bytes, and raw moving as many in
// the same iteration, and reports run's GB/s and the ratio (x_raw): load
// from other work falls on both alike.
func againstRaw(b *testing.B, raw *rawStream, size int, run func()) {
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var rawTime, runTime time.Duration
	for b.Loop() {
		start := time.Now()
		raw.move(b)
		mid := time.Now()
		run()
		rawTime += mid.Sub(start)
		runTime += time.Since(mid)
	}
	b.ReportMetric(float64(b.N)*float64(size)/runTime.Seconds()/1e9, "GB/s")
	b.ReportMetric(rawTime.Seconds()/runTime.Seconds(), "x_raw")
}

// BenchmarkTransfer moves batches of 16 requests of 1 MiB over 4 loopback
// paths and reports GB/s and the ratio to one raw TCP stream (x_raw). Each
// iteration moves the same 16 MiB once through the raw stream and once
// through the engine, timing them apart, so load from other work falls on
// both alike; ns/op covers both. Compare runs with benchstat.
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
				againstRaw(b, newRawStream(b, size, block), size, run)
			})
		}
	}
}

// BenchmarkGetBlocks reads blocks by key in one stream (a prefix of 64
// blocks of 64 KiB; 16 blocks of 1 MiB), into one buffer, and reports GB/s
// and the ratio to the raw TCP stream moving the same bytes in blocks of
// the same size in the same iteration (x_raw).
func BenchmarkGetBlocks(b *testing.B) {
	for _, c := range []struct{ n, size int }{{64, 64 << 10}, {16, 1 << 20}} {
		b.Run(fmt.Sprintf("%dx%dKiB", c.n, c.size>>10), func(b *testing.B) {
			n, size := c.n, c.size
			src := benchSource{}
			keys := make([]block.Key, n)
			for i := range keys {
				keys[i] = blockKey(i)
				src[keys[i]] = make([]byte, size)
			}
			server := newEngine(b, newTransport(b, Options{Topology: loopbackTopology(61, 1)}))
			server.ServeBlocks(src)
			client := newEngine(b, newTransport(b, Options{Topology: loopbackTopology(71, 1)}))
			dst := make([]byte, n*size)
			run := func() {
				st, err := client.GetBlocks(b.Context(), server.Addr(), keys, int64(size))
				if err != nil {
					b.Fatal(err)
				}
				for i := range keys {
					if info, err := st.Next(); err != nil || !info.Found {
						b.Fatalf("block %d: %+v %v", i, info, err)
					}
					if err := st.ReadData(dst[i*size : (i+1)*size]); err != nil {
						b.Fatal(err)
					}
				}
				st.Close()
			}
			run()
			againstRaw(b, newRawStream(b, n*size, size), n*size, run)
		})
	}
}

// benchSource serves blocks with their checksums known, as a store does.
type benchSource map[block.Key][]byte

func (s benchSource) PinBlock(_ context.Context, k block.Key) (rdma.PinnedBlock, bool) {
	b, ok := s[k]
	return rdma.PinnedBlock{Data: b}, ok
}
