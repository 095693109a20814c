package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/yuebing/yuebing/bench"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/server/resp"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/ssd"
)

// Options configures `yuebing bench resp-vs-redis`.
type Options struct {
	// Sizes are the value sizes measured. Default 4 KiB, 1 MiB, 4 MiB.
	Sizes []int64
	// SmallSizes and SmallClients are the small-value cases, SET, GET
	// and INCR (values this small are kept inline) at each size and each
	// number of connections, 100,000 requests (10,000 with Quick), rows
	// named op_size_cN. Default redis-benchmark's 3 bytes and LMCache's
	// 28-byte metadata, at 8 and 50 connections. NoSmall leaves them out.
	SmallSizes   []int64
	SmallClients []int
	NoSmall      bool
	// Clients is redis-benchmark's -c. Default 8.
	Clients int
	// Pipeline is the -P of an extra run at the smallest size. Default 16;
	// 1 turns the extra run off.
	Pipeline int
	// Bytes sets the requests of each run: Bytes / size, within [200,
	// 100000] (twice that when pipelined). Default 2 GiB.
	Bytes int64
	// Repeat runs each case this many times against each server,
	// alternating which goes first, and reports the median. Default 3.
	Repeat int
	// RedisServer and RedisBenchmark are the programs, found on PATH by
	// default (Debian packages redis-server and redis-tools).
	RedisServer, RedisBenchmark string
	// DRAMCapacity and SSDCapacity size yuebing's store. Default 2 GiB and
	// 4 GiB; the SSD tier lives in Dir.
	DRAMCapacity, SSDCapacity int64
	// Dir holds the SSD tier and redis-server's directory. Default: a new
	// temporary directory, removed afterwards.
	Dir string
	// Threads is redis-benchmark's --threads; 0 leaves it out (one thread).
	Threads int
	// Pin runs redis-benchmark on CPU 0 and both servers on the other CPUs
	// (this process, with GOMAXPROCS set to match, and redis-server, which
	// inherits its affinity), so that on a small machine the client and the
	// server under test do not take CPU from each other. It needs taskset
	// (util-linux) and at least two CPUs. redis-server's --io-threads is
	// RedisIOThreads either way.
	Pin bool
	// EventLoop serves yuebing's connections from its event loops
	// (resp.Options.EventLoop).
	EventLoop bool
	// RedisIOThreads is redis-server's --io-threads, the same with and
	// without Pin. Default 1: I/O threads busy-wait, so on a small machine
	// more of them take CPU the benchmark client needs and inflate
	// redis-server's CPU per request.
	RedisIOThreads int
	// FlowChunkBytes is the chunk size of the lmcache_flow row, LMCache's
	// two-key redis:// flow (SET <k>kv_bytes and SET <k>metadata, then
	// EXISTS, GET <k>metadata, GET <k>kv_bytes) over FlowClients
	// connections, reported in chunks per second. Default
	// DefaultFlowChunkBytes (QuickFlowChunkBytes with Quick); FlowClients
	// defaults to 32. NoFlow leaves the row out.
	FlowChunkBytes int64
	FlowClients    int
	NoFlow         bool
	// MemoryKeys is how many keys of MemoryValueBytes (default 28, LMCache's
	// metadata) the memory row loads into a fresh node and a fresh
	// redis-server, reporting each one's bytes per key; the node's DRAM
	// tier is MemoryDRAM bytes (default DRAMCapacity), inline values
	// allowed all of it, and the row says whether every key fit. Default
	// DefaultMemoryKeys (QuickMemoryKeys with Quick). NoMemory leaves the
	// row out.
	MemoryKeys       int
	MemoryValueBytes int64
	MemoryDRAM       int64
	NoMemory         bool
	// Quick divides the requests by 10 and runs each case once.
	Quick bool
	// Progress, if set, is advanced once per redis-benchmark run.
	Progress *bench.Progress
}

func (o *Options) ensureDefaults() {
	if len(o.Sizes) == 0 {
		o.Sizes = []int64{4096, 1 << 20, 4 << 20}
	}
	if len(o.SmallSizes) == 0 {
		o.SmallSizes = []int64{3, 28}
	}
	if len(o.SmallClients) == 0 {
		o.SmallClients = []int{8, 50}
	}
	if o.Clients == 0 {
		o.Clients = 8
	}
	if o.RedisIOThreads == 0 {
		o.RedisIOThreads = 1
	}
	if o.FlowChunkBytes == 0 {
		o.FlowChunkBytes = DefaultFlowChunkBytes
		if o.Quick {
			o.FlowChunkBytes = QuickFlowChunkBytes
		}
	}
	if o.FlowClients == 0 {
		o.FlowClients = 32
	}
	if o.Pipeline == 0 {
		o.Pipeline = 16
	}
	if o.Bytes == 0 {
		o.Bytes = 2 << 30
	}
	if o.Repeat == 0 {
		o.Repeat = 3
		if o.Quick {
			o.Repeat = 1
		}
	}
	if o.DRAMCapacity == 0 {
		o.DRAMCapacity = 2 << 30
	}
	if o.SSDCapacity == 0 {
		o.SSDCapacity = 4 << 30
	}
	if o.MemoryKeys == 0 {
		o.MemoryKeys = DefaultMemoryKeys
		if o.Quick {
			o.MemoryKeys = QuickMemoryKeys
		}
	}
	if o.MemoryValueBytes == 0 {
		o.MemoryValueBytes = 28
	}
	if o.MemoryDRAM == 0 {
		o.MemoryDRAM = o.DRAMCapacity
	}
}

type respCase struct {
	size     int64
	pipeline int
	requests int
	clients  int
	tests    []string // redis-benchmark's -t, upper case
	small    bool     // a small-value case: rows named op_size_cclients
	command  []string // a command line instead of -t; its result is tests[0]
	flow     bool     // the lmcache_flow case, driven by runFlow: requests chunks
}

func (o *Options) cases() []respCase {
	var cs []respCase
	smallest := slices.Min(o.Sizes)
	for _, size := range o.Sizes {
		n := int(min(max(o.Bytes/size, 200), 100000))
		if o.Quick {
			n = max(n/10, 50)
		}
		cs = append(cs, respCase{size: size, pipeline: 1, requests: n, clients: o.Clients, tests: []string{"SET", "GET"}})
		if size == smallest && o.Pipeline > 1 {
			cs = append(cs, respCase{size: size, pipeline: o.Pipeline, requests: 2 * n, clients: o.Clients, tests: []string{"SET", "GET"}})
		}
	}
	n := 100000
	if o.Quick {
		n = 10000
	}
	small := o.SmallSizes
	if o.NoSmall {
		small = nil // the small-value rows only: the flow row is not one
	}
	for _, size := range small {
		for _, clients := range o.SmallClients {
			cs = append(cs, respCase{size: size, pipeline: 1, requests: n, clients: clients, tests: []string{"SET", "GET", "INCR"}, small: true},
				// After the SET of the run before, so the key exists.
				respCase{size: size, pipeline: 1, requests: n, clients: clients, tests: []string{"EXISTS"}, small: true,
					command: []string{"exists", "key:__rand_int__"}})
		}
	}
	if !o.NoFlow {
		chunks := int(min(max(o.Bytes/o.FlowChunkBytes, int64(4*o.FlowClients)), 100000))
		if o.Quick {
			chunks = max(chunks/10, 2*o.FlowClients)
		}
		cs = append(cs, respCase{size: o.FlowChunkBytes, pipeline: 1, requests: chunks, clients: o.FlowClients, tests: []string{"LMCACHE_FLOW"}, flow: true})
	}
	return cs
}

// Runs is how many redis-benchmark runs Run makes, for a
// progress bar.
func Runs(o Options) int {
	o.ensureDefaults()
	n := 2 * o.Repeat * len(o.cases())
	if !o.NoMemory {
		n++
	}
	return n
}

// Run runs the same redis-benchmark command lines (SET and GET,
// o.Clients connections) against yuebing's Redis front end, served in this
// process over a DRAM + SSD store, and against redis-server started with
// --save "" --appendonly no --io-threads o.RedisIOThreads, and reports yuebing's
// requests per second with redis-server's as the baseline.
func Run(ctx context.Context, o Options) (*bench.Report, error) {
	o.ensureDefaults()
	var err error
	if o.RedisServer, err = lookTool(o.RedisServer, "redis-server", "redis-server"); err != nil {
		return nil, err
	}
	if o.RedisBenchmark, err = lookTool(o.RedisBenchmark, "redis-benchmark", "redis-tools"); err != nil {
		return nil, err
	}
	client := []string{o.RedisBenchmark}
	ioThreads := o.RedisIOThreads
	if o.Pin {
		taskset, err := lookTool("", "taskset", "util-linux")
		if err != nil {
			return nil, err
		}
		restore, _, err := pinServers()
		if err != nil {
			return nil, err
		}
		defer restore()
		client = []string{taskset, "-c", "0", o.RedisBenchmark}
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "yuebing-bench-resp-"); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	yb, stopYB, err := startRespServer(o, filepath.Join(dir, "ssd"))
	if err != nil {
		return nil, err
	}
	defer stopYB()
	rs, redisPid, stopRS, err := startRedisServer(ctx, o.RedisServer, filepath.Join(dir, "redis"), ioThreads)
	if err != nil {
		return nil, err
	}
	defer stopRS()
	// Server CPU per request, beside requests per second: on a small
	// machine the benchmark client shares the cores with the server, so
	// what the server leaves to it matters. yuebing's is this process's
	// (the driver only waits meanwhile), redis-server's is read from /proc.
	cpu := map[string]func() time.Duration{"yuebing": selfCPU, "redis-server": func() time.Duration { return procCPU(redisPid) }}

	rep := &bench.Report{Columns: []string{"name", "value_bytes", "pipeline", "clients", "requests", "ops_per_sec", "mb_per_sec",
		"baseline", "baseline_ops_per_sec", "ratio", "cpu_us_per_op", "baseline_cpu_us_per_op"}}
	rep.Human = map[string][]string{"resp": {"op", "value_bytes", "clients", "pipeline", "ratio", "cpu_ratio", "keys", "bytes_per_key", "redis_bytes_per_key", "fits"}}
	for k, v := range bench.HumanColumns["resp"] {
		rep.Human[k] = v
	}
	for _, c := range o.cases() {
		runs := map[string]map[string][]float64{"yuebing": {}, "redis-server": {}}
		cpuPerOp := map[string][]float64{}
		for r := range o.Repeat {
			order := []string{"yuebing", "redis-server"}
			if r%2 == 1 {
				order[0], order[1] = order[1], order[0]
			}
			for _, who := range order {
				addr := yb
				if who == "redis-server" {
					addr = rs
				}
				before := cpu[who]()
				var res map[string]float64
				if c.flow {
					var cps float64
					cps, err = runFlow(ctx, addr, c.clients, c.requests, flowValue(c.size))
					res = map[string]float64{"LMCACHE_FLOW": cps}
				} else {
					res, err = runRedisBenchmark(ctx, client, addr, o.Threads, c)
				}
				if err != nil {
					return nil, fmt.Errorf("bench: redis-benchmark against %s, %d-byte values: %w", who, c.size, err)
				}
				// The tests of the run (SET and GET, and INCR) share the CPU time.
				// The flow's client runs in this process, so yuebing's CPU
				// would include it: its rows carry no CPU figures.
				if !c.flow {
					cpuPerOp[who] = append(cpuPerOp[who], float64((cpu[who]()-before).Microseconds())/float64(len(c.tests)*c.requests))
				}
				for test, rps := range res {
					runs[who][test] = append(runs[who][test], rps)
				}
				if o.Progress != nil {
					o.Progress.Add(1)
				}
			}
		}
		for _, test := range c.tests {
			ours, base := median(runs["yuebing"][test]), median(runs["redis-server"][test])
			op := strings.ToLower(test)
			name := fmt.Sprintf("%s_%d", op, c.size)
			if c.flow {
				name = op
			}
			if c.pipeline > 1 {
				name += fmt.Sprintf("_p%d", c.pipeline)
			}
			if c.small {
				name += fmt.Sprintf("_c%d", c.clients)
			}
			cpuOurs, cpuBase := median(cpuPerOp["yuebing"]), median(cpuPerOp["redis-server"])
			cpuRatio := 0.0
			if cpuBase > 0 {
				cpuRatio = cpuOurs / cpuBase
			}
			rep.Add(bench.Row{
				"name": name, "op": op, "cpu_ratio": cpuRatio,
				"value_bytes": c.size, "pipeline": c.pipeline, "clients": c.clients, "requests": c.requests,
				"ops_per_sec": ours, "mb_per_sec": ours * float64(c.size) / 1e6,
				"baseline": "redis-server", "baseline_ops_per_sec": base, "ratio": ours / base,
				"cpu_us_per_op": median(cpuPerOp["yuebing"]), "baseline_cpu_us_per_op": median(cpuPerOp["redis-server"]),
				"pinned": o.Pin, "event_loop": o.EventLoop, "redis_io_threads": ioThreads,
			})
			// The same case again under the one name every front-end
			// row shares, as the memory row has it: a reader takes the
			// cases apart by op, value_bytes, clients and pipeline rather
			// than by parsing names; row is the named row's.
			if !c.flow {
				rep.Add(bench.Row{
					"name": "resp", "row": name, "op": op, "value_bytes": c.size, "clients": c.clients, "pipeline": c.pipeline,
					"requests": c.requests, "ops_per_sec": ours, "baseline": "redis-server", "baseline_ops_per_sec": base,
					"ratio": ours / base, "cpu_ratio": cpuRatio, "cpu_us_per_op": cpuOurs, "baseline_cpu_us_per_op": cpuBase,
					"pinned": o.Pin, "event_loop": o.EventLoop, "redis_io_threads": ioThreads,
				})
			}
		}
	}
	if !o.NoMemory {
		m, err := measureMemory(ctx, o, dir, o.MemoryKeys, o.MemoryValueBytes, o.MemoryDRAM)
		if err != nil {
			return nil, err
		}
		if o.Progress != nil {
			o.Progress.Add(1)
		}
		rep.Add(bench.Row{
			"name": "resp", "op": "memory", "value_bytes": o.MemoryValueBytes, "keys": m.Keys,
			"bytes_per_key": m.BytesPerKey, "charged_bytes_per_key": m.ChargedPerKey,
			"redis_bytes_per_key": m.RedisBytesPerKey, "baseline": "redis-server",
			"ratio":      m.BytesPerKey / m.RedisBytesPerKey,
			"dram_bytes": m.DRAMBytes, "dram_used_bytes": m.DRAMUsed, "fits": m.Fits,
			"load_seconds": m.LoadSeconds, "baseline_load_seconds": m.RedisLoadSeconds,
		})
	}
	return rep, nil
}

func lookTool(path, name, pkg string) (string, error) {
	if path == "" {
		path = name
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("bench: %s not found (Debian package %s): %w", name, pkg, err)
	}
	return p, nil
}

// flowValue is a chunk of size bytes.
func flowValue(size int64) []byte {
	v := make([]byte, size)
	for i := range v {
		v[i] = byte(i * 7)
	}
	return v
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// startRespServer serves yuebing's Redis front end on 127.0.0.1:0.
func startRespServer(o Options, dir string) (addr string, stop func(), err error) {
	quiet := slog.New(slog.DiscardHandler)
	// Populated before the first run, so puts find warm pages and the
	// CPU time of populating them is not counted as the requests' (the
	// CPU figures are this whole process's).
	d, err := dram.New(dram.Options{Capacity: o.DRAMCapacity, Prefault: true, Logger: quiet})
	if err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	s, err := ssd.Open(ssd.Options{Dir: dir, Capacity: o.SSDCapacity, Logger: quiet})
	if err != nil {
		d.Close()
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	h, err := tier.NewHierarchy([]tier.Tier{d, s}, tier.HierarchyOptions{Logger: quiet})
	if err != nil {
		d.Close()
		s.Close()
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	srv, err := resp.NewServer(resp.Options{Store: h, Logger: quiet, EventLoop: o.EventLoop})
	if err != nil {
		h.Close()
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Close()
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
		h.Close()
	}, nil
}

// pinServers moves every thread of this process to CPUs 1 and up, so that
// threads and processes started later inherit that set, and sets
// GOMAXPROCS to its size, which it returns. restore undoes both.
func pinServers() (restore func(), cpus int, err error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, 0, fmt.Errorf("bench: %w", err)
	}
	if !all.IsSet(0) || all.Count() < 2 {
		return nil, 0, fmt.Errorf("bench: pinning needs CPU 0 and at least one more, this process may use %d", all.Count())
	}
	servers := all
	servers.Clear(0)
	setAll := func(set *unix.CPUSet) error {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			// A thread may exit meanwhile; what matters is that none is
			// left on the client's CPU.
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return err
			}
		}
		return nil
	}
	if err := setAll(&servers); err != nil {
		setAll(&all)
		return nil, 0, fmt.Errorf("bench: pinning: %w", err)
	}
	procs := runtime.GOMAXPROCS(servers.Count())
	return func() {
		setAll(&all)
		runtime.GOMAXPROCS(procs)
	}, servers.Count(), nil
}

// selfCPU is the user and system CPU time of this process.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user and system CPU time of process pid, all its threads,
// from /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// startRedisServer starts redis-server on a free port with persistence
// off and ioThreads I/O threads.
func startRedisServer(ctx context.Context, bin, dir string, ioThreads int) (addr string, pid int, stop func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, nil, fmt.Errorf("bench: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, nil, fmt.Errorf("bench: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logf := filepath.Join(dir, "redis.log")
	cmd := exec.CommandContext(ctx, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--io-threads", strconv.Itoa(ioThreads), "--dir", dir, "--logfile", logf)
	if err := cmd.Start(); err != nil {
		return "", 0, nil, fmt.Errorf("bench: starting redis-server: %w", err)
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for range 500 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, cmd.Process.Pid, stop, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	log, _ := os.ReadFile(logf)
	return "", 0, nil, fmt.Errorf("bench: redis-server did not start: %s", log)
}

// runRedisBenchmark runs one redis-benchmark and returns requests per
// second by test name. redis-benchmark exits non-zero on an error reply;
// anything it prints to stderr is treated as a failure too.
func runRedisBenchmark(ctx context.Context, bin []string, addr string, threads int, c respCase) (map[string]float64, error) {
	host, port, _ := net.SplitHostPort(addr)
	args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(c.clients), "-d", strconv.FormatInt(c.size, 10),
		"-n", strconv.Itoa(c.requests), "--csv"}
	if len(c.command) == 0 {
		args = append(args, "-t", strings.ToLower(strings.Join(c.tests, ",")))
	}
	if c.pipeline > 1 {
		args = append(args, "-P", strconv.Itoa(c.pipeline))
	}
	if threads > 0 {
		args = append(args, "--threads", strconv.Itoa(threads))
	}
	args = append(args, c.command...)
	cmd := exec.CommandContext(ctx, bin[0], append(bin[1:], args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, errb.String())
	}
	if errb.Len() > 0 {
		return nil, fmt.Errorf("stderr: %s", errb.String())
	}
	res, err := ParseRedisBenchmarkCSV(&out)
	if err != nil {
		return nil, err
	}
	if len(c.command) > 0 {
		// The one line is named after the command line.
		for _, rps := range res {
			res = map[string]float64{c.tests[0]: rps}
		}
	}
	for _, t := range c.tests {
		if res[t] <= 0 {
			return nil, fmt.Errorf("no %s result in %q", t, out.String())
		}
	}
	return res, nil
}

// ParseRedisBenchmarkCSV reads redis-benchmark --csv output: an optional
// header line, then one line per test, "NAME","requests per second",...
func ParseRedisBenchmarkCSV(r io.Reader) (map[string]float64, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	res := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(strings.TrimSpace(line), ",")
		if len(f) < 2 {
			continue
		}
		name := strings.Trim(f[0], `"`)
		if name == "test" {
			continue
		}
		rps, err := strconv.ParseFloat(strings.Trim(f[1], `"`), 64)
		if err != nil {
			return nil, fmt.Errorf("bench: redis-benchmark line %q: %w", line, err)
		}
		res[name] = rps
	}
	if len(res) == 0 {
		return nil, errors.New("bench: no results in redis-benchmark output")
	}
	return res, nil
}
