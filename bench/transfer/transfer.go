package transfer

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

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/shm"
	"github.com/yuebing/yuebing/rdma/tcp"
	"github.com/yuebing/yuebing/rdma/wire"
)

// Options configure Run, in the spirit of Mooncake's
// transfer_engine_bench. Zero fields mean their defaults.
type Options struct {
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
	// the two alternating in rounds of half a second so that load from
	// other work on a shared machine hits both alike. Default 5s.
	Duration time.Duration
	// Progress draws a progress bar on stderr.
	Progress bool
}

// EnsureDefaults fills zero fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
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
func (o *Options) Validate() error {
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

// Columns orders the table of Run's report.
var Columns = []string{"name", "gbps", "baseline", "baseline_gbps", "ratio", "crc_baseline", "crc_baseline_gbps", "crc_ratio", "p50_us", "p99_us", "requests",
	"transport", "op", "threads", "batch", "block_size", "paths", "slice_size"}

// roundLength is the length of one baseline-then-transfer round. Short
// rounds, alternating, mean that load from other work on a shared machine
// falls on both sides of the ratio alike.
const roundLength = 500 * time.Millisecond

// Run measures the transfer service on this host: a server engine
// and a client engine in one process, the client moving Threads x Batch
// blocks in a loop. The report has the same-run baseline (one raw TCP stream
// over loopback for tcp; copy() on the same number of goroutines for shm)
// and the transfer, with GB/s, per-request p50/p99 latency and the ratio to
// the baseline. For tcp a second baseline, raw_tcp_crc, is the same raw
// stream also checksumming every block with CRC-32C on both ends, as the
// transport does per slice; the transfer row carries crc_baseline_gbps and
// crc_ratio against it. Baselines and transfer alternate in rounds of
// roundLength, each getting Duration in total.
func Run(ctx context.Context, o Options) (*bench.Report, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var prog *bench.Progress
	if o.Progress {
		prog = bench.NewProgress("transfer", int64(2*o.Duration/time.Millisecond))
		defer prog.Done()
	}
	tick := func(d time.Duration) {
		if prog != nil {
			prog.Add(int64(d / time.Millisecond))
		}
	}
	s, err := newTransferSession(ctx, o)
	if err != nil {
		return nil, err
	}
	defer s.close()

	mem := newBaselineMem(o)
	rounds := max(1, int(o.Duration/roundLength))
	per := o.Duration / time.Duration(rounds)
	withCRC := o.Transport == "tcp"
	var base, crcBase struct{ bytes, secs float64 }
	for range rounds {
		n, el, err := runBaseline(ctx, o, mem, false, per)
		if err != nil {
			return nil, err
		}
		base.bytes, base.secs = base.bytes+n, base.secs+el.Seconds()
		tick(per)
		if withCRC {
			n, el, err := runBaseline(ctx, o, mem, true, per)
			if err != nil {
				return nil, err
			}
			crcBase.bytes, crcBase.secs = crcBase.bytes+n, crcBase.secs+el.Seconds()
		}
		if err := s.run(ctx, per); err != nil {
			return nil, err
		}
		tick(per)
	}
	baseGBps := base.bytes / base.secs / 1e9

	baseName := "raw_tcp"
	if o.Transport == "shm" {
		baseName = "copy"
	}
	r := &bench.Report{Columns: Columns}
	r.Human = bench.HumanColumns["transfer"]
	r.Add(bench.Row{"name": baseName, "gbps": baseGBps, "block_size": o.BlockSize, "threads": baselineThreads(o)})
	row := s.row()
	row["baseline"] = baseName
	row["baseline_gbps"] = baseGBps
	row["ratio"] = row["gbps"].(float64) / baseGBps
	if withCRC {
		crcGBps := crcBase.bytes / crcBase.secs / 1e9
		r.Add(bench.Row{"name": "raw_tcp_crc", "gbps": crcGBps, "block_size": o.BlockSize, "threads": 1})
		row["crc_baseline"] = "raw_tcp_crc"
		row["crc_baseline_gbps"] = crcGBps
		row["crc_ratio"] = row["gbps"].(float64) / crcGBps
	}
	r.Add(row)
	return r, nil
}

func baselineThreads(o Options) int {
	if o.Transport == "shm" {
		return o.Threads
	}
	return 1
}

// baselineMem is the memory the baselines move, allocated and faulted in
// once: as much as the transfer moves (Threads x Batch x BlockSize on each
// side), so that baseline and transfer see the same caches.
type baselineMem struct {
	src, dst []byte
}

func newBaselineMem(o Options) *baselineMem {
	n := o.Threads * o.Batch * o.BlockSize
	m := &baselineMem{src: make([]byte, n), dst: make([]byte, n)}
	for i := 0; i < n; i += 4096 {
		m.src[i], m.dst[i] = byte(i>>12), 1
	}
	return m
}

// runBaseline runs a baseline for about d and returns the bytes it moved
// and the time they took.
func runBaseline(ctx context.Context, o Options, m *baselineMem, crc bool, d time.Duration) (float64, time.Duration, error) {
	if o.Transport == "shm" {
		n, el := copyBytes(ctx, o, m, d)
		return n, el, nil
	}
	return rawTCPBytes(ctx, o.BlockSize, m, crc, d)
}

// checksum is block.Checksum over p in wire.ChunkSize pieces, as the
// transport computes it.
func checksum(p []byte) uint32 {
	crc := uint32(0)
	for off := 0; off < len(p); off += wire.ChunkSize {
		crc = block.UpdateChecksum(crc, p[off:min(off+wire.ChunkSize, len(p))])
	}
	return crc
}

// copyBytes is copy() on Threads goroutines, each moving its own Batch
// blocks between two buffers, as the shm transfers do.
func copyBytes(ctx context.Context, o Options, m *baselineMem, d time.Duration) (float64, time.Duration) {
	per := o.Batch * o.BlockSize
	var wg sync.WaitGroup
	moved := make([]int64, o.Threads)
	start := time.Now()
	deadline := start.Add(d)
	for i := range o.Threads {
		wg.Go(func() {
			src, dst := m.src[i*per:(i+1)*per], m.dst[i*per:(i+1)*per]
			for time.Now().Before(deadline) && ctx.Err() == nil {
				for off := 0; off < per; off += o.BlockSize {
					copy(dst[off:off+o.BlockSize], src[off:off+o.BlockSize])
				}
				moved[i] += int64(per)
			}
		})
	}
	wg.Wait()
	var total int64
	for _, m := range moved {
		total += m
	}
	return float64(total), time.Since(start)
}

// rawTCPBytes is one TCP connection over loopback in this process, one side
// writing blockSize pieces of m.src in turn and the other reading them into
// m.dst with io.ReadFull: the same bytes from the same amount of memory
// through the same kernel path, with nothing of ours on it.
//
// With crc set, both ends also compute the CRC-32C of every block, in the
// transport's chunks: the same integrity work the tcp transport does per
// slice, so the ratio to it isolates what slicing and paths cost.
func rawTCPBytes(ctx context.Context, blockSize int, m *baselineMem, crc bool, d time.Duration) (float64, time.Duration, error) {
	fail := func(err error) (float64, time.Duration, error) {
		return 0, 0, fmt.Errorf("bench: raw tcp baseline: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
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
		var n int64
		var start time.Time
		for off := 0; ; off = (off + blockSize) % len(m.dst) {
			buf := m.dst[off : off+blockSize]
			if _, err := io.ReadFull(nc, buf); err != nil {
				done <- result{n: n, el: time.Since(start)}
				return
			}
			if crc {
				checksum(buf)
			}
			if n == 0 {
				start = time.Now()
			}
			n += int64(blockSize)
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(d)
	for off := 0; time.Now().Before(deadline) && ctx.Err() == nil; off = (off + blockSize) % len(m.src) {
		buf := m.src[off : off+blockSize]
		if crc {
			checksum(buf)
		}
		if _, err := nc.Write(buf); err != nil {
			nc.Close()
			return fail(err)
		}
	}
	nc.Close()
	res := <-done
	if res.err != nil {
		return fail(res.err)
	}
	// The first block only starts the clock.
	return float64(max(res.n-int64(blockSize), 0)), res.el, nil
}

const benchToken = "yuebing-bench-transfer"

func newTransports(o Options, dir string) (server, client rdma.Transport, err error) {
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

// transferSession is a server and a client engine set up once and run in
// rounds.
type transferSession struct {
	o              Options
	server, client *rdma.Engine
	sm             *rdma.SharedMemory
	dir            string
	lseg           *rdma.Segment
	remote         *rdma.RemoteSegment
	op             rdma.Op
	lats           [][]time.Duration
	elapsed        time.Duration
}

func newTransferSession(ctx context.Context, o Options) (_ *transferSession, err error) {
	s := &transferSession{o: o, lats: make([][]time.Duration, o.Threads), op: rdma.Read}
	if o.Op == "write" {
		s.op = rdma.Write
	}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.dir, err = bench.TempDir(); err != nil {
		return nil, err
	}
	str, ctr, err := newTransports(o, s.dir)
	if err != nil {
		return nil, err
	}
	eopts := rdma.Options{ClusterToken: benchToken, Workers: max(64, o.Threads*o.Batch), MaxBatchSize: o.Batch}
	if s.server, err = rdma.New(eopts, str); err != nil {
		return nil, err
	}
	if s.client, err = rdma.New(eopts, ctr); err != nil {
		return nil, err
	}
	size := o.Threads * o.Batch * o.BlockSize
	if s.sm, err = rdma.NewSharedMemory("bench", size); err != nil {
		return nil, err
	}
	for i := 0; i < size; i += 4096 {
		s.sm.Bytes()[i] = byte(i >> 12)
	}
	if _, err := s.server.RegisterShared("kv", "cpu:0", s.sm); err != nil {
		return nil, err
	}
	local := make([]byte, size)
	for i := 0; i < size; i += 4096 {
		local[i] = 1 // fault the pages in before the clock starts
	}
	if s.lseg, err = s.client.Register("buf", "cpu:0", local); err != nil {
		return nil, err
	}
	if s.remote, err = s.client.OpenSegment(ctx, s.server.Addr(), "kv"); err != nil {
		return nil, err
	}
	// Warm up: dial every path and touch every page once.
	for th := range o.Threads {
		if err := s.batch(ctx, th, false); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *transferSession) close() {
	if s.client != nil {
		s.client.Close()
	}
	if s.server != nil {
		s.server.Close()
	}
	if s.sm != nil {
		s.sm.Close()
	}
	if s.dir != "" {
		bench.RemoveAll(s.dir)
	}
}

// batch runs one batch of thread th, recording its latencies if asked.
func (s *transferSession) batch(ctx context.Context, th int, record bool) error {
	o := s.o
	b, err := s.client.AllocateBatch(o.Batch)
	if err != nil {
		return err
	}
	reqs := make([]rdma.Request, o.Batch)
	for j := range reqs {
		off := uint64((th*o.Batch + j) * o.BlockSize)
		reqs[j] = rdma.Request{Op: s.op, Local: s.lseg, LocalOffset: off, Remote: s.remote, RemoteOffset: off, Length: uint64(o.BlockSize)}
	}
	if _, err := b.Submit(ctx, reqs...); err != nil {
		return err
	}
	st, err := b.Wait(ctx)
	if err == nil && st.State != rdma.Completed {
		err = fmt.Errorf("bench: batch %s: %w", st.State, st.Err)
	}
	if err != nil {
		return err
	}
	if record {
		for j := range o.Batch {
			r, _ := b.Status(j)
			s.lats[th] = append(s.lats[th], r.Elapsed)
		}
	}
	return b.Free()
}

// run keeps every thread submitting batches for about d.
func (s *transferSession) run(ctx context.Context, d time.Duration) error {
	errs := make([]error, s.o.Threads)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for th := range s.o.Threads {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil && errs[th] == nil {
				errs[th] = s.batch(ctx, th, true)
			}
		})
	}
	wg.Wait()
	s.elapsed += time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

func (s *transferSession) row() bench.Row {
	o := s.o
	all := slices.Concat(s.lats...)
	slices.Sort(all)
	bytes := float64(len(all)) * float64(o.BlockSize)
	row := bench.Row{
		"name":       o.Transport + "_" + o.Op,
		"transport":  o.Transport,
		"op":         o.Op,
		"threads":    o.Threads,
		"batch":      o.Batch,
		"block_size": o.BlockSize,
		"gbps":       bytes / s.elapsed.Seconds() / 1e9,
		"p50_us":     percentile(all, 0.50),
		"p99_us":     percentile(all, 0.99),
		"requests":   len(all),
	}
	if o.Transport == "tcp" {
		row["paths"] = o.Paths
		row["slice_size"] = o.SliceSize
	}
	return row
}

// percentile returns the q-quantile of sorted latencies in microseconds.
func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(int(q*float64(len(sorted))), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Microsecond)
}
