package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/shm"
	"github.com/yuebing/yuebing/rdma/tcp"
)

// TransferOptions configure RunTransfer, in the spirit of Mooncake's
// transfer_engine_bench. Zero fields mean their defaults.
type TransferOptions struct {
	// Transport is "tcp" (default) or "shm".
	Transport string
	// Op is "read" (default) or "write", seen from the initiator.
	Op string
	// Threads is how many goroutines submit batches. Default 4.
	Threads int
	// Batch is the number of requests per batch. Default 16.
	Batch int
	// BlockSize is the bytes per request. Default 1 MiB.
	BlockSize int
	// Paths is the number of NICs on each side (tcp only); each NIC is a
	// loopback address of its own, 127.0.0.x. Default 4.
	Paths int
	// SliceSize is the tcp slice size. Default 64 KiB (the transport's).
	SliceSize int
	// Duration is how long the transfer runs; the baseline runs as long,
	// half before and half after, so drift on a shared machine hits both.
	// Default 5s.
	Duration time.Duration
	// Progress draws a progress bar on stderr.
	Progress bool
}

// EnsureDefaults fills zero fields with their defaults and returns o.
func (o *TransferOptions) EnsureDefaults() *TransferOptions {
	if o.Transport == "" {
		o.Transport = "tcp"
	}
	if o.Op == "" {
		o.Op = "read"
	}
	if o.Threads == 0 {
		o.Threads = 4
	}
	if o.Batch == 0 {
		o.Batch = 16
	}
	if o.BlockSize == 0 {
		o.BlockSize = 1 << 20
	}
	if o.Paths == 0 {
		o.Paths = 4
	}
	if o.SliceSize == 0 {
		o.SliceSize = 64 << 10
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Second
	}
	return o
}

// maxBenchMemory bounds the memory the benchmark registers on each side.
const maxBenchMemory = 4 << 30

// Validate reports every invalid field at once.
func (o *TransferOptions) Validate() error {
	var errs []error
	if o.Transport != "tcp" && o.Transport != "shm" {
		errs = append(errs, fmt.Errorf("bench: transport %q: want tcp or shm", o.Transport))
	}
	if o.Op != "read" && o.Op != "write" {
		errs = append(errs, fmt.Errorf("bench: op %q: want read or write", o.Op))
	}
	if o.Threads <= 0 || o.Threads > 1024 {
		errs = append(errs, fmt.Errorf("bench: threads %d not in [1, 1024]", o.Threads))
	}
	if o.Batch <= 0 || o.Batch > 4096 {
		errs = append(errs, fmt.Errorf("bench: batch %d not in [1, 4096]", o.Batch))
	}
	if o.BlockSize <= 0 {
		errs = append(errs, fmt.Errorf("bench: block size %d must be positive", o.BlockSize))
	} else if o.Threads > 0 && o.Batch > 0 && int64(o.Threads)*int64(o.Batch)*int64(o.BlockSize) > maxBenchMemory {
		errs = append(errs, fmt.Errorf("bench: threads x batch x block size = %d bytes, at most %d", int64(o.Threads)*int64(o.Batch)*int64(o.BlockSize), int64(maxBenchMemory)))
	}
	if o.Paths <= 0 || o.Paths > 16 {
		errs = append(errs, fmt.Errorf("bench: paths %d not in [1, 16]", o.Paths))
	}
	if o.SliceSize <= 0 || o.SliceSize > 1<<30 {
		errs = append(errs, fmt.Errorf("bench: slice size %d not in [1, 1 GiB]", o.SliceSize))
	}
	if o.Duration <= 0 {
		errs = append(errs, fmt.Errorf("bench: duration %v must be positive", o.Duration))
	}
	return errors.Join(errs...)
}

// TransferColumns orders the table of RunTransfer's report.
var TransferColumns = []string{"name", "gbps", "baseline", "baseline_gbps", "ratio", "p50_us", "p99_us", "requests",
	"transport", "op", "threads", "batch", "block_size", "paths", "slice_size"}

// RunTransfer measures the transfer service on this host: a server engine
// and a client engine in one process, the client moving Threads x Batch
// blocks in a loop for Duration. The report has two rows, the same-run
// baseline (one raw TCP stream over loopback for tcp; copy() on the same
// number of goroutines for shm) and the transfer, with GB/s, per-request
// p50/p99 latency and the ratio to the baseline.
func RunTransfer(ctx context.Context, o TransferOptions) (*Report, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var prog *Progress
	if o.Progress {
		prog = NewProgress("transfer", int64(2*o.Duration/time.Millisecond))
		defer prog.Done()
	}
	tick := func(d time.Duration) {
		if prog != nil {
			prog.Add(int64(d / time.Millisecond))
		}
	}

	base1, err := runBaseline(ctx, o, o.Duration/2)
	if err != nil {
		return nil, err
	}
	tick(o.Duration / 2)
	row, err := runEngines(ctx, o, tick)
	if err != nil {
		return nil, err
	}
	base2, err := runBaseline(ctx, o, o.Duration/2)
	if err != nil {
		return nil, err
	}
	tick(o.Duration / 2)
	baseGBps := (base1 + base2) / 2

	baseName := "raw_tcp"
	if o.Transport == "shm" {
		baseName = "copy"
	}
	r := &Report{Columns: TransferColumns}
	r.Add(Row{"name": baseName, "gbps": baseGBps, "block_size": o.BlockSize, "threads": baselineThreads(o)})
	row["baseline"] = baseName
	row["baseline_gbps"] = baseGBps
	row["ratio"] = row["gbps"].(float64) / baseGBps
	r.Add(row)
	return r, nil
}

func baselineThreads(o TransferOptions) int {
	if o.Transport == "shm" {
		return o.Threads
	}
	return 1
}

func runBaseline(ctx context.Context, o TransferOptions, d time.Duration) (float64, error) {
	if o.Transport == "shm" {
		return copyGBps(ctx, o, d), nil
	}
	return rawTCPGBps(ctx, o.BlockSize, d)
}

// copyGBps is the copy() bandwidth of Threads goroutines, each moving its
// own Batch blocks between two buffers, as the shm transfers do.
func copyGBps(ctx context.Context, o TransferOptions, d time.Duration) float64 {
	n := o.Batch * o.BlockSize
	var wg sync.WaitGroup
	moved := make([]int64, o.Threads)
	start := time.Now()
	deadline := start.Add(d)
	for i := range o.Threads {
		wg.Go(func() {
			src, dst := make([]byte, n), make([]byte, n)
			for off := 0; off < n; off += 4096 {
				src[off] = byte(off) // touch the pages before timing counts
			}
			copy(dst, src)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				for off := 0; off < n; off += o.BlockSize {
					copy(dst[off:off+o.BlockSize], src[off:off+o.BlockSize])
				}
				moved[i] += int64(n)
			}
		})
	}
	wg.Wait()
	var total int64
	for _, m := range moved {
		total += m
	}
	return float64(total) / time.Since(start).Seconds() / 1e9
}

// rawTCPGBps is one TCP connection over loopback in this process, one side
// writing blockSize buffers and the other reading them with io.ReadFull:
// the same bytes through the same kernel path, with nothing of ours on it.
func rawTCPGBps(ctx context.Context, blockSize int, d time.Duration) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("bench: raw tcp baseline: %w", err)
	}
	defer ln.Close()
	type result struct {
		n   int64
		el  time.Duration
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer nc.Close()
		buf := make([]byte, blockSize)
		var n int64
		var start time.Time
		for {
			if _, err := io.ReadFull(nc, buf); err != nil {
				done <- result{n: n, el: time.Since(start)}
				return
			}
			if n == 0 {
				start = time.Now()
			}
			n += int64(blockSize)
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("bench: raw tcp baseline: %w", err)
	}
	buf := make([]byte, blockSize)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, err := nc.Write(buf); err != nil {
			nc.Close()
			return 0, fmt.Errorf("bench: raw tcp baseline: %w", err)
		}
	}
	nc.Close()
	res := <-done
	if res.err != nil {
		return 0, fmt.Errorf("bench: raw tcp baseline: %w", res.err)
	}
	// The first block only starts the clock.
	return float64(res.n-int64(blockSize)) / res.el.Seconds() / 1e9, nil
}

const benchToken = "yuebing-bench-transfer"

func newTransports(o TransferOptions, dir string) (server, client rdma.Transport, err error) {
	if o.Transport == "shm" {
		s, err := shm.New(shm.Options{Socket: filepath.Join(dir, "server.sock")})
		if err != nil {
			return nil, nil, err
		}
		c, err := shm.New(shm.Options{Socket: filepath.Join(dir, "client.sock")})
		return s, c, err
	}
	nics := func(first int) rdma.Topology {
		var n []string
		for i := range o.Paths {
			n = append(n, "127.0.0."+strconv.Itoa(first+i)+":0")
		}
		return rdma.Topology{rdma.AnyLocation: {Preferred: n}}
	}
	opts := func(first int) tcp.Options {
		return tcp.Options{Topology: nics(first), SliceSize: o.SliceSize, MaxSliceSize: max(16<<20, o.SliceSize)}
	}
	s, err := tcp.New(opts(100))
	if err != nil {
		return nil, nil, err
	}
	c, err := tcp.New(opts(150))
	return s, c, err
}

func runEngines(ctx context.Context, o TransferOptions, tick func(time.Duration)) (Row, error) {
	dir, err := tempDir()
	if err != nil {
		return nil, err
	}
	defer removeAll(dir)
	str, ctr, err := newTransports(o, dir)
	if err != nil {
		return nil, err
	}
	eopts := rdma.Options{ClusterToken: benchToken, Workers: max(64, o.Threads*o.Batch), MaxBatchSize: o.Batch}
	server, err := rdma.New(eopts, str)
	if err != nil {
		return nil, err
	}
	defer server.Close()
	client, err := rdma.New(eopts, ctr)
	if err != nil {
		return nil, err
	}
	defer client.Close()

	size := o.Threads * o.Batch * o.BlockSize
	sm, err := rdma.NewSharedMemory("bench", size)
	if err != nil {
		return nil, err
	}
	defer sm.Close()
	for i := 0; i < size; i += 4096 {
		sm.Bytes()[i] = byte(i >> 12)
	}
	if _, err := server.RegisterShared("kv", "cpu:0", sm); err != nil {
		return nil, err
	}
	local := make([]byte, size)
	for i := 0; i < size; i += 4096 {
		local[i] = 1 // fault the pages in before the clock starts
	}
	lseg, err := client.Register("buf", "cpu:0", local)
	if err != nil {
		return nil, err
	}
	remote, err := client.OpenSegment(ctx, server.Addr(), "kv")
	if err != nil {
		return nil, err
	}
	op := rdma.Read
	if o.Op == "write" {
		op = rdma.Write
	}

	runBatch := func(th int, lat []time.Duration) ([]time.Duration, error) {
		b, err := client.AllocateBatch(o.Batch)
		if err != nil {
			return lat, err
		}
		reqs := make([]rdma.Request, o.Batch)
		for j := range reqs {
			off := uint64((th*o.Batch + j) * o.BlockSize)
			reqs[j] = rdma.Request{Op: op, Local: lseg, LocalOffset: off, Remote: remote, RemoteOffset: off, Length: uint64(o.BlockSize)}
		}
		if _, err := b.Submit(ctx, reqs...); err != nil {
			return lat, err
		}
		st, err := b.Wait(ctx)
		if err == nil && st.State != rdma.Completed {
			err = fmt.Errorf("bench: batch %s: %w", st.State, st.Err)
		}
		if err != nil {
			return lat, err
		}
		for j := range o.Batch {
			s, _ := b.Status(j)
			lat = append(lat, s.Elapsed)
		}
		return lat, b.Free()
	}
	// Warm up: dial every path and touch every page once.
	for th := range o.Threads {
		if _, err := runBatch(th, nil); err != nil {
			return nil, err
		}
	}

	lats := make([][]time.Duration, o.Threads)
	errs := make([]error, o.Threads)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(o.Duration)
	stopTick := make(chan struct{})
	var tickWG sync.WaitGroup
	tickWG.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				tick(100 * time.Millisecond)
			case <-stopTick:
				return
			}
		}
	})
	for th := range o.Threads {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				lats[th], errs[th] = runBatch(th, lats[th])
				if errs[th] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopTick)
	tickWG.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	bytes := float64(len(all)) * float64(o.BlockSize)
	row := Row{
		"name":       o.Transport + "_" + o.Op,
		"transport":  o.Transport,
		"op":         o.Op,
		"threads":    o.Threads,
		"batch":      o.Batch,
		"block_size": o.BlockSize,
		"gbps":       bytes / elapsed.Seconds() / 1e9,
		"p50_us":     percentile(all, 0.50),
		"p99_us":     percentile(all, 0.99),
		"requests":   len(all),
	}
	if o.Transport == "tcp" {
		row["paths"] = o.Paths
		row["slice_size"] = o.SliceSize
	}
	return row, nil
}

// percentile returns the q-quantile of sorted latencies in microseconds.
func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(int(q*float64(len(sorted))), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Microsecond)
}
