package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/tier/s3/versitygw"
	"github.com/yuebing/yuebing/tier/ssd"
)

// Options configures Soak: real `yuebing serve` processes under mixed
// load past their capacity, killed (SIGKILL) and restarted on a schedule,
// every read checked against what was acknowledged (docs/benchmarks.md,
// "Soak").
type Options struct {
	// Binary is the yuebing executable to run as `yuebing serve`. Required.
	Binary string
	// Duration of the load. Default 10m.
	Duration time.Duration
	// Cluster runs three nodes, the first with an embedded etcd, instead
	// of one.
	Cluster bool
	// KillEvery is the time between kills; a negative value never kills.
	// Default 60s. A single node is killed each time; in a cluster a node
	// that neither hosts etcd nor leads, in turn.
	KillEvery time.Duration
	// DRAMCapacity and SSDCapacity are each node's tiers. Defaults 64 MiB
	// and 256 MiB.
	DRAMCapacity, SSDCapacity int64
	// MaxInflightBytes is each node's limits.max_inflight_bytes. Default
	// 256 MiB.
	MaxInflightBytes int64
	// Overcommit is the written working set over the nodes' DRAM+SSD
	// capacity: the slots the load writes to, at their mean value size.
	// Default 3.
	Overcommit float64
	// MinValue and MaxValue bound the size of a value. Defaults 4 KiB and
	// 256 KiB.
	MinValue, MaxValue int
	// Workers is the number of load goroutines per front end (HTTP
	// blocks, HTTP objects, RESP, batches). Default 1.
	Workers int
	// BatchSize is the number of blocks in a batch put or get. Default 8.
	BatchSize int
	// DurableEvery is the time between durable puts: blocks larger than
	// the DRAM tier, which the node acknowledges only once they are synced
	// on SSD. Default 5s; negative disables them.
	DurableEvery time.Duration
	// Window is the span of one latency window. Default 10s.
	Window time.Duration
	// RestartFor bounds the retries of a restart. Default 60s.
	RestartFor time.Duration
	// Dir holds the nodes' data and logs. Default a temporary directory,
	// removed at the end unless Keep is set or the soak failed.
	Dir  string
	Keep bool
	// Engines is the number of engine simulators (`yuebing engine-sim`)
	// publishing KV events to a router (`yuebing conductor` with engines)
	// that RouterWorkers goroutines send OpenAI requests through. Default
	// 2; negative runs neither.
	Engines int
	// EngineKillEvery is the time between kills of an engine, the first
	// half of it in. Default KillEvery; negative never kills one.
	EngineKillEvery time.Duration
	// RouterWorkers is the number of goroutines sending requests through
	// the router. Default 2.
	RouterWorkers int
	// S3 gives each node an S3 tier under its SSD; off by default.
	S3 S3Options
	// Seed makes the load repeatable. Default 1.
	Seed uint64
	// Log receives progress lines. Default io.Discard.
	Log io.Writer
}

const soakNS = "soak/kv"

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Duration == 0 {
		o.Duration = 10 * time.Minute
	}
	if o.KillEvery == 0 {
		o.KillEvery = 60 * time.Second
	}
	if o.DRAMCapacity == 0 {
		o.DRAMCapacity = 64 << 20
	}
	if o.SSDCapacity == 0 {
		o.SSDCapacity = 256 << 20
	}
	if o.MaxInflightBytes == 0 {
		o.MaxInflightBytes = 256 << 20
	}
	if o.Overcommit == 0 {
		o.Overcommit = 3
	}
	if o.MinValue == 0 {
		o.MinValue = 4 << 10
	}
	if o.MaxValue == 0 {
		o.MaxValue = 256 << 10
	}
	if o.Workers == 0 {
		o.Workers = 1
	}
	if o.BatchSize == 0 {
		o.BatchSize = 8
	}
	if o.DurableEvery == 0 {
		o.DurableEvery = 5 * time.Second
	}
	if o.Window == 0 {
		o.Window = 10 * time.Second
	}
	if o.RestartFor == 0 {
		o.RestartFor = 60 * time.Second
	}
	if o.Engines == 0 {
		o.Engines = 2
	}
	if o.EngineKillEvery == 0 {
		o.EngineKillEvery = o.KillEvery
	}
	if o.RouterWorkers == 0 {
		o.RouterWorkers = 2
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	o.S3.ensureDefaults(o)
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: soak: "+format, append([]any{bench.ErrOptions}, a...)...))
	}
	if o.Binary == "" {
		bad("the yuebing binary is required")
	}
	if o.Duration <= 0 {
		bad("duration %s, want > 0", o.Duration)
	}
	if o.DRAMCapacity < 4<<20 || o.SSDCapacity < 16<<20 {
		bad("capacities DRAM %d, SSD %d: want at least 4 MiB and 16 MiB", o.DRAMCapacity, o.SSDCapacity)
	}
	if o.durableBytes() > o.SSDCapacity/2 && o.DurableEvery > 0 {
		bad("a durable block (DRAM capacity + 1 MiB, %d bytes) must fit half the SSD tier (%d)", o.durableBytes(), o.SSDCapacity)
	}
	if o.MaxInflightBytes < max(o.durableBytes(), 32<<20) {
		bad("max in-flight bytes %d: want at least a durable block (%d) and 32 MiB", o.MaxInflightBytes, o.durableBytes())
	}
	if o.Overcommit <= 0 || o.Overcommit > 100 {
		bad("overcommit %g, want (0, 100]", o.Overcommit)
	}
	if o.MinValue < soakHeaderSize || o.MaxValue < o.MinValue || int64(o.MaxValue) > o.DRAMCapacity/8 {
		bad("value sizes %d..%d: want %d <= min <= max <= DRAM/8", o.MinValue, o.MaxValue, soakHeaderSize)
	}
	if o.Workers < 1 || o.Workers > 64 || o.BatchSize < 1 || o.BatchSize > 256 {
		bad("workers %d (1-64) and batch size %d (1-256)", o.Workers, o.BatchSize)
	}
	if o.Engines > 16 || (o.Engines > 0 && (o.RouterWorkers < 1 || o.RouterWorkers > 64)) {
		bad("engines %d (at most 16) and router workers %d (1-64)", o.Engines, o.RouterWorkers)
	}
	if o.Window <= 0 || o.RestartFor <= 0 {
		bad("window and restart-for must be positive")
	}
	o.S3.validate(o, bad)
	return errors.Join(errs...)
}

// durableBytes is the size of a durable put: just over the DRAM tier, so
// the hierarchy places it on SSD and acknowledges it after the sync.
func (o *Options) durableBytes() int64 { return o.DRAMCapacity + 1<<20 }

// RSSBound is the resident memory a node may use: its DRAM arena, the
// heap the in-flight limit allows, its pebble index on disk (the most its
// block cache and memtables could mirror), what its S3 tier may buffer for
// upload, and 1 GiB for everything else (Go runtime, connection buffers,
// the key tables, an embedded etcd).
func (o *Options) RSSBound(index int64) int64 {
	return o.DRAMCapacity + o.MaxInflightBytes + index + o.S3.memBytes() + 1<<30
}

// Node is one node's figures.
type Node struct {
	Name string
	// Starts counts the node's starts (1 + restarts).
	Starts int64
	// MaxRSS is the largest VmRSS sampled; Index the largest pebble index
	// size measured; Bound the RSS bound with that index.
	MaxRSS, Index, Bound int64
}

// Window is one latency window.
type Window struct {
	Start            time.Duration
	Requests, Errors int64
	// P99Get and P99Put are the 99th percentile latencies of reads and
	// writes that completed in the window (0 when there were none).
	P99Get, P99Put time.Duration
	MaxRSS         int64
	Kills          int
}

// Result is what a soak measured.
type Result struct {
	Nodes    []Node
	Windows  []Window
	Duration time.Duration
	Requests int64
	// Hits and Misses count reads that found a value and reads that did
	// not (a cache may forget).
	Hits, Misses int64
	// Errors counts failed requests by kind: conn_refused, conn_reset,
	// timeout, http_429, http_503, resp_err, ...; ErrorsByOp by request
	// and kind ("batch_put:http_429").
	Errors, ErrorsByOp map[string]int64
	// ErrorsOutsideRestarts counts errors while every node was up and had
	// been for 5 s.
	ErrorsOutsideRestarts int64
	// CorruptReads counts reads that returned bytes other than a value
	// the read may see; Corrupt has the first few, described.
	CorruptReads int64
	Corrupt      []string
	// StaleAfterRestart counts RESP reads that returned an older
	// acknowledged value after the node restarted (allowed, see the doc).
	StaleAfterRestart int64
	// DurableAcked counts puts acknowledged from the SSD tier;
	// DurableChecked those read back after a restart because their record
	// was on disk when the node died; LostWrites those not read back.
	DurableAcked, DurableChecked, LostWrites int64
	Lost                                     []string
	// DurableInDRAM counts durable-sized puts the node placed in DRAM
	// (none expected).
	DurableInDRAM int64
	Kills         int
	// RestartRetries counts failed restart attempts, retried.
	RestartRetries int
	MaxDowntime    time.Duration
	// PutBytes is the bytes of values acknowledged.
	PutBytes    int64
	WorkingSet  int64
	P99Get      time.Duration
	P99Put      time.Duration
	MaxRSS      int64 // of the node closest to its bound
	RSSBound    int64 // that node's bound
	RSSExceeded bool
	// NodeLog counts the warnings and errors the nodes logged, by node,
	// level and message ("c: WARN resp: a SET did not reach every node; ...").
	NodeLog   map[string]int64
	KillTimes []time.Duration
	// Router is the router part's figures; nil without engines.
	Router *Router
	// S3 is the S3 tier's figures; nil without one.
	S3           *S3
	Dir          string
	Cluster      bool
	DRAM, SSD    int64
	MaxInflight  int64
	DurableBytes int64
}

// Failed says whether the soak found a fault: a corrupt read, a lost write,
// a node over its memory bound, a fault of the router's (see
// Router.Failed) or of the S3 tier's (S3.Failed).
func (r *Result) Failed() bool {
	return r.CorruptReads > 0 || r.LostWrites > 0 || r.RSSExceeded || (r.Router != nil && r.Router.Failed()) ||
		(r.S3 != nil && r.S3.Failed())
}

// soak is one run.
type soak struct {
	o     Options
	nodes []*bench.Node
	rt    *soakRouter       // nil without engines
	s3srv *versitygw.Server // the local S3 server; nil without one
	s3    s3State
	start time.Time
	// faults is a token held through a node's kill cycle (kill to
	// restarted) and through the S3 server's outage (kill to every tier
	// recovered), so that neither hides the other: a node down through
	// the whole outage could not report its tier degraded, nor one killed
	// before the tiers recovered report it healthy.
	faults chan struct{}

	requests, hits, misses, corrupt, stale atomic.Int64
	durAcked, durChecked, lost, durInDRAM  atomic.Int64
	putBytes, outsideRestarts              atomic.Int64
	s3OutageErrors                         atomic.Int64
	durSeq                                 atomic.Uint64

	mu        sync.Mutex
	errs      map[string]int64
	errsByOp  map[string]int64
	examples  []string
	lostNotes []string
	windows   map[int]*soakWindowAcc
	killTimes []time.Duration
}

type soakWindowAcc struct {
	get, put         []time.Duration
	requests, errors int64
	rss              int64
	kills            int
}

// Soak runs the soak and returns its figures; the error is for a soak
// that could not run (a node that would not start), not for faults found,
// which the result reports (Result.Failed).
func Run(ctx context.Context, o Options) (*Result, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := &soak{o: o, errs: map[string]int64{}, errsByOp: map[string]int64{}, windows: map[int]*soakWindowAcc{},
		faults: make(chan struct{}, 1)}
	dir := o.Dir
	if dir == "" {
		var err error
		if dir, err = bench.TempDir(); err != nil {
			return nil, err
		}
	}
	stop := func() {
		for _, n := range s.nodes {
			n.Stop()
		}
		if s.rt != nil {
			s.rt.stop()
		}
		if s.s3srv != nil {
			s.s3srv.Stop()
		}
	}
	if o.S3.Local {
		var err error
		if s.s3srv, err = startS3Server(ctx, o.S3.Versitygw, dir); err != nil {
			return nil, err
		}
	}
	if err := s.startNodes(ctx, dir); err != nil {
		stop()
		return nil, err
	}
	res := s.run(ctx)
	res.Dir = dir
	stop()
	res.NodeLog = map[string]int64{}
	for _, n := range s.nodes {
		for msg, c := range bench.LogMessages(n.Log.Name()) {
			res.NodeLog[n.Name+": "+msg] += c
		}
	}
	if s.rt != nil {
		for _, p := range append(slices.Clone(s.rt.engines), s.rt.router) {
			for msg, c := range bench.LogMessages(p.Log.Name()) {
				res.NodeLog[p.Name+": "+msg] += c
			}
		}
	}
	if o.Dir == "" && !o.Keep && !res.Failed() {
		bench.RemoveAll(dir)
	}
	return res, nil
}

func (s *soak) startNodes(ctx context.Context, dir string) error {
	o := &s.o
	count := 1
	if o.Cluster {
		count = 3
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "YUEBING_") {
			env = append(env, kv)
		}
	}
	env = append(env, "YUEBING_CLUSTER_ETCD_EMBEDDED_PEER_LISTEN=127.0.0.1:0")
	hc := &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}}
	for i := range count {
		name := string(rune('a' + i))
		nodeEnv := env
		if o.S3.Enabled() {
			nodeEnv = append(slices.Clone(env), s.s3Env(name)...)
		}
		n := &bench.Node{Proc: bench.Proc{Name: name, Bin: o.Binary, Env: nodeEnv}, Dir: filepath.Join(dir, name), Hc: hc}
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return err
		}
		lf, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		n.Log = lf
		n.Args = []string{"serve", "--http-listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0",
			"--transfer-listen", "", "--shm-listen", "", "--data-dir", n.Dir,
			"--dram-capacity", fmt.Sprint(o.DRAMCapacity), "--ssd-capacity", fmt.Sprint(o.SSDCapacity),
			"--max-inflight-bytes", fmt.Sprint(o.MaxInflightBytes), "--max-batch-bytes", fmt.Sprint(32 << 20),
			"--max-block-size", fmt.Sprint(max(o.durableBytes(), 32<<20)),
			"--shutdown-timeout", "5s", "--log-level", "warn"}
		if o.Cluster {
			n.PinFlag("--transfer-listen", "127.0.0.1:0")
			n.Args = append(n.Args, "--cluster", "soak", "--node-name", name, "--lease-ttl", "2s")
			if i == 0 {
				n.Args = append(n.Args, "--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0")
			} else {
				n.Args = append(n.Args, "--etcd", s.nodes[0].Etcd)
			}
		}
		s.nodes = append(s.nodes, n)
		if _, err := n.Start(ctx, o.RestartFor); err != nil {
			return err
		}
		if o.S3.Enabled() {
			// The first start checked the bucket; a restart while the S3
			// server is down must come up degraded instead of failing.
			n.Env = append(n.Env, "YUEBING_S3_DEGRADED_OK=true")
		}
		n.UpSince.Store(time.Now().UnixNano())
	}
	if o.Cluster {
		if err := s.waitCluster(ctx, 60*time.Second); err != nil {
			return err
		}
	}
	if o.Engines > 0 {
		return s.startRouter(ctx, dir, env)
	}
	return nil
}

// waitCluster waits until every node sees a leader that has heard from
// every node.
func (s *soak) waitCluster(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		ok := true
		for _, n := range s.nodes {
			st, err := n.Status(ctx)
			if err != nil || !st.HasLeader || st.LeaderStatus == nil || len(st.LeaderStatus.Nodes) != len(s.nodes) {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("bench: soak: the cluster did not form within %s", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *soak) logf(format string, a ...any) {
	fmt.Fprintf(s.o.Log, "soak %s: %s\n", time.Since(s.start).Round(time.Second), fmt.Sprintf(format, a...))
}

func (s *soak) window(t time.Time) *soakWindowAcc {
	i := int(t.Sub(s.start) / s.o.Window)
	w := s.windows[i]
	if w == nil {
		w = &soakWindowAcc{}
		s.windows[i] = w
	}
	return w
}

// allUp says whether every node is up and has been for a while: errors
// then are not explained by a restart.
func (s *soak) allUp() bool {
	for _, n := range s.nodes {
		if n.State.Load() != bench.NodeUp || time.Since(time.Unix(0, n.UpSince.Load())) < 5*time.Second {
			return false
		}
	}
	return true
}

// done records one request: op is "block_get", "resp_set", "context", ...
func (s *soak) done(ctx context.Context, op string, t0 time.Time, err error) {
	write := !strings.HasSuffix(op, "_get")
	if err != nil && ctx.Err() != nil {
		return // cut by the end of the soak
	}
	now := time.Now()
	lat := now.Sub(t0)
	s.requests.Add(1)
	kind := ""
	if err != nil {
		kind = errorKind(err)
		if s.allUp() {
			s.outsideRestarts.Add(1)
			// A 507 is a pin past the pinned-bytes limit, which the
			// load asks for all along (soft-pinned contexts), with
			// or without S3: the API's answer, not an outage's fault.
			if s.o.S3.Enabled() && s.s3.inOutage() && kind != pinRefused {
				s.s3OutageErrors.Add(1)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.window(now)
	w.requests++
	if err != nil {
		w.errors++
		s.errs[kind]++
		s.errsByOp[op+":"+kind]++
		return
	}
	if write {
		w.put = append(w.put, lat)
	} else {
		w.get = append(w.get, lat)
	}
}

// errorKind names the kind of a failed request.
func errorKind(err error) string {
	var ce *client.Error
	var re *respError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		return fmt.Sprintf("http_%d", ce.StatusCode)
	case errors.As(err, &re):
		word, _, _ := strings.Cut(re.msg, " ")
		return "resp_" + strings.ToLower(word)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "conn_refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "conn_reset"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, client.ErrProtocol):
		return "protocol"
	}
	return "other"
}

// corruptRead records a read that returned bytes it may not see.
func (s *soak) corruptRead(node *bench.Node, what string, a ...any) {
	s.corrupt.Add(1)
	msg := fmt.Sprintf("%s on %s: %s", time.Since(s.start).Round(time.Millisecond), node.Name, fmt.Sprintf(what, a...))
	s.mu.Lock()
	if len(s.examples) < 20 {
		s.examples = append(s.examples, msg)
	}
	s.mu.Unlock()
	s.logf("CORRUPT READ %s", msg)
}

func (s *soak) run(ctx context.Context) *Result {
	o := &s.o
	s.start = time.Now()
	loadCtx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var wg sync.WaitGroup
	ws := s.workers()
	for _, w := range ws {
		wg.Go(func() { s.runWorker(loadCtx, w) })
	}
	if o.DurableEvery > 0 {
		wg.Go(func() { s.runDurable(loadCtx) })
	}
	if s.rt != nil {
		for i := range o.RouterWorkers {
			wg.Go(func() { s.rt.runRouterWorker(loadCtx, i) })
		}
		if o.EngineKillEvery > 0 {
			wg.Go(func() {
				if err := s.rt.killLoop(ctx, loadCtx); err != nil {
					s.logf("engine restart failed: %v", err)
				}
			})
		}
	}
	sampCtx, stopSampler := context.WithCancel(ctx)
	var sampWG sync.WaitGroup
	sampWG.Go(func() { s.sampleRSS(sampCtx) })
	if o.S3.Enabled() {
		sampWG.Go(func() { s.sampleS3(sampCtx) })
	}
	var s3Err error
	if s.s3srv != nil && o.S3.KillAt > 0 {
		wg.Go(func() { s3Err = s.killS3(ctx, loadCtx) })
	}
	var maxDown time.Duration
	retries := 0
	var fatal error
	var killWG sync.WaitGroup
	if o.KillEvery > 0 {
		killWG.Go(func() { maxDown, retries, fatal = s.killLoop(ctx, loadCtx) })
	}
	s.progressLoop(loadCtx)
	wg.Wait()
	killWG.Wait()
	stopSampler()
	sampWG.Wait()
	if s3Err != nil {
		s.logf("S3 server restart failed: %v", s3Err)
	}
	if fatal != nil {
		s.logf("restart failed: %v", fatal)
		s.mu.Lock()
		s.examples = append(s.examples, "restart failed: "+fatal.Error())
		s.mu.Unlock()
		s.corrupt.Add(0)
	}
	res := s.result()
	if s.rt != nil {
		res.Router = s.rt.result(ctx)
	}
	res.MaxDowntime, res.RestartRetries = maxDown, retries
	if o.S3.Enabled() {
		res.S3 = s.s3Result()
	}
	if fatal != nil {
		// A node that cannot come back has lost everything it held.
		res.LostWrites++
		res.Lost = append(res.Lost, "restart failed: "+fatal.Error())
	}
	return res
}

// progressLoop prints a line per window until the load ends.
func (s *soak) progressLoop(ctx context.Context) {
	t := time.NewTicker(s.o.Window)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		i := int(time.Since(s.start)/s.o.Window) - 1
		w := s.windows[i]
		s.mu.Unlock()
		var p99g, p99p time.Duration
		var reqs, errs int64
		if w != nil {
			s.mu.Lock()
			p99g, p99p, reqs, errs = p99(w.get), p99(w.put), w.requests, w.errors
			s.mu.Unlock()
		}
		var rss int64
		for _, n := range s.nodes {
			rss = max(rss, n.MaxRSS.Load())
		}
		router := ""
		if s.rt != nil {
			router = fmt.Sprintf("; router: %d requests, %d faults", s.rt.requests.Load(), s.rt.bad5xx.Load()+s.rt.outside503.Load()+s.rt.badAnswers.Load())
		}
		s.logf("%d requests (%d errors) in the last window, p99 get %s put %s; totals: %d requests, %d corrupt, %d lost of %d durable checked, max rss %s%s",
			reqs, errs, p99g.Round(100*time.Microsecond), p99p.Round(100*time.Microsecond),
			s.requests.Load(), s.corrupt.Load(), s.lost.Load(), s.durChecked.Load(), formatBytes(rss), router)
	}
}

func formatBytes(n int64) string {
	return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
}

func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return d[min(len(d)-1, len(d)*99/100)]
}

// sampleRSS samples every node's VmRSS each second and its index size
// every five.
func (s *soak) sampleRSS(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for i := 0; ; i++ {
		var top int64
		for _, n := range s.nodes {
			if pid := n.Pid(); pid > 0 {
				if rss, err := bench.ReadRSS(pid); err == nil {
					top = max(top, rss)
					for {
						old := n.MaxRSS.Load()
						if rss <= old || n.MaxRSS.CompareAndSwap(old, rss) {
							break
						}
					}
				}
			}
			if i%5 == 0 {
				ix := bench.IndexBytes(n.Dir)
				if ix > n.MaxIndex.Load() {
					n.MaxIndex.Store(ix)
				}
			}
		}
		s.mu.Lock()
		w := s.window(time.Now())
		w.rss = max(w.rss, top)
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// killLoop kills a node every KillEvery while the load runs, then
// restarts it and checks its durable writes.
func (s *soak) killLoop(ctx, loadCtx context.Context) (maxDown time.Duration, retries int, err error) {
	t := time.NewTicker(s.o.KillEvery)
	defer t.Stop()
	turn := 0
	for {
		select {
		case <-loadCtx.Done():
			return maxDown, retries, nil
		case <-t.C:
		}
		if !s.holdFaults(loadCtx) {
			return maxDown, retries, nil
		}
		// Leave the last kill time to recover within the run.
		if deadline, ok := loadCtx.Deadline(); ok && time.Until(deadline) < min(s.o.KillEvery/2, 10*time.Second) {
			s.releaseFaults()
			continue
		}
		victim := s.pickVictim(ctx, turn)
		turn++
		down, r, err := s.killAndRestart(ctx, victim)
		s.releaseFaults()
		retries += r
		maxDown = max(maxDown, down)
		if err != nil {
			return maxDown, retries, err
		}
	}
}

// holdFaults takes the fault token (see soak.faults), waiting for the
// other fault to end; false: ctx ended first.
func (s *soak) holdFaults(ctx context.Context) bool {
	select {
	case s.faults <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *soak) releaseFaults() { <-s.faults }

// pickVictim chooses the node to kill: the only one, or in a cluster one
// that neither hosts the embedded etcd (node a; killing it would take
// etcd down with it) nor leads, taking turns.
func (s *soak) pickVictim(ctx context.Context, turn int) *bench.Node {
	if len(s.nodes) == 1 {
		return s.nodes[0]
	}
	leader := ""
	if st, err := s.nodes[0].Status(ctx); err == nil && st.HasLeader {
		leader = st.Leader.Name
	}
	var cands []*bench.Node
	for _, n := range s.nodes[1:] {
		if n.Name != leader {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		cands = s.nodes[1:]
	}
	return cands[turn%len(cands)]
}

// killAndRestart is one kill cycle: a durable put, then SIGKILL under load; a scan of the dead
// node's segment files for the durable writes still on disk; a restart
// (retried) while the node's load waits; a read of each of those writes;
// then the load resumes.
func (s *soak) killAndRestart(ctx context.Context, n *bench.Node) (time.Duration, int, error) {
	if s.o.DurableEvery > 0 {
		// A durable write acknowledged just before the kill: the
		// periodic ones are often evicted before it (the SSD tier
		// evicts the least recently read segment first, and nobody
		// reads them).
		s.durablePut(ctx, n, make([]byte, s.o.durableBytes()))
	}
	t0 := time.Now()
	n.State.Store(bench.NodeDown)
	n.Kill()
	s.mu.Lock()
	s.killTimes = append(s.killTimes, t0.Sub(s.start))
	s.window(t0).kills++
	s.mu.Unlock()
	s.logf("killed %s (kill -9)", n.Name)

	onDisk := map[block.Key]ssd.RecordInfo{}
	scanErr := ssd.ScanRecords(filepath.Join(n.Dir, "ssd"), func(r ssd.RecordInfo) error {
		onDisk[r.Key] = r
		return nil
	})
	n.DurMu.Lock()
	var check []bench.DurableWrite
	for _, d := range n.Durable {
		if r, ok := onDisk[d.Key]; ok && r.Size == int64(d.Size) {
			check = append(check, d)
		}
	}
	// What is not on disk now was evicted before the kill; it can never
	// come back.
	n.Durable = slices.Clone(check)
	n.DurMu.Unlock()
	if scanErr != nil {
		s.logf("scanning %s's segments: %v", n.Name, scanErr)
	}

	n.State.Store(bench.NodeVerifying)
	retries, err := n.Start(ctx, s.o.RestartFor)
	if err != nil {
		return time.Since(t0), retries, err
	}
	c := n.Client()
	lostNow := 0
	for _, d := range check {
		if ok := s.checkDurable(ctx, n, c, d); !ok {
			lostNow++
		}
	}
	s.durChecked.Add(int64(len(check)))
	n.UpSince.Store(time.Now().UnixNano())
	n.State.Store(bench.NodeUp)
	down := time.Since(t0)
	s.logf("restarted %s after %s (%d retries); %d durable writes on disk, %d lost", n.Name, down.Round(time.Millisecond), retries, len(check), lostNow)
	if s.o.Cluster {
		if err := s.waitCluster(ctx, 60*time.Second); err != nil {
			s.logf("%v", err)
		}
	}
	return down, retries, nil
}

// checkDurable reads a durable write back from the restarted node.
func (s *soak) checkDurable(ctx context.Context, n *bench.Node, c *client.Client, d bench.DurableWrite) bool {
	var err error
	for range 10 {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		var data []byte
		data, _, err = c.Get(cctx, block.Key(d.Key), client.GetOptions{})
		cancel()
		switch {
		case err == nil:
			v, perr := parseSoakValue(data)
			if perr != nil || v.kind != kindDurable || v.version != d.Seq {
				s.corruptRead(n, "durable write %d read back after a restart: %v (%+v)", d.Seq, perr, v)
			}
			return true
		case errors.Is(err, client.ErrChecksum):
			s.corruptRead(n, "durable write %d after a restart: %v", d.Seq, err)
			return true
		case errors.Is(err, client.ErrNotFound):
			s.loseWrite(n, fmt.Sprintf("durable write %d (%d bytes, key %s): on disk at the kill, missing after the restart", d.Seq, d.Size, block.Key(d.Key)))
			return false
		}
		time.Sleep(500 * time.Millisecond)
	}
	s.loseWrite(n, fmt.Sprintf("durable write %d: unreadable after the restart: %v", d.Seq, err))
	return false
}

func (s *soak) loseWrite(n *bench.Node, what string) {
	s.lost.Add(1)
	s.mu.Lock()
	if len(s.lostNotes) < 20 {
		s.lostNotes = append(s.lostNotes, n.Name+": "+what)
	}
	s.mu.Unlock()
	s.logf("LOST WRITE on %s: %s", n.Name, what)
}

func (s *soak) result() *Result {
	o := &s.o
	res := &Result{
		Duration: time.Since(s.start), Requests: s.requests.Load(), Hits: s.hits.Load(), Misses: s.misses.Load(),
		ErrorsOutsideRestarts: s.outsideRestarts.Load(),
		CorruptReads:          s.corrupt.Load(), StaleAfterRestart: s.stale.Load(),
		DurableAcked: s.durAcked.Load(), DurableChecked: s.durChecked.Load(), LostWrites: s.lost.Load(),
		DurableInDRAM: s.durInDRAM.Load(), PutBytes: s.putBytes.Load(),
		Cluster: o.Cluster, DRAM: o.DRAMCapacity, SSD: o.SSDCapacity, MaxInflight: o.MaxInflightBytes, DurableBytes: o.durableBytes(),
	}
	res.WorkingSet = int64(o.Overcommit * float64((o.DRAMCapacity+o.SSDCapacity)*int64(len(s.nodes))))
	s.mu.Lock()
	defer s.mu.Unlock()
	res.Errors, res.ErrorsByOp = maps.Clone(s.errs), maps.Clone(s.errsByOp)
	res.Corrupt = slices.Clone(s.examples)
	res.Lost = slices.Clone(s.lostNotes)
	res.KillTimes = slices.Clone(s.killTimes)
	res.Kills = len(s.killTimes)
	var allGet, allPut []time.Duration
	// Windows that start after the load ended hold only its stragglers.
	for i := 0; time.Duration(i)*o.Window < o.Duration; i++ {
		w := s.windows[i]
		if w == nil {
			continue
		}
		allGet, allPut = append(allGet, w.get...), append(allPut, w.put...)
		res.Windows = append(res.Windows, Window{Start: time.Duration(i) * o.Window, Requests: w.requests, Errors: w.errors,
			P99Get: p99(w.get), P99Put: p99(w.put), MaxRSS: w.rss, Kills: w.kills})
	}
	res.P99Get, res.P99Put = p99(allGet), p99(allPut)
	worst := -1.0
	for _, n := range s.nodes {
		sn := Node{Name: n.Name, Starts: n.Life.Load(), MaxRSS: n.MaxRSS.Load(), Index: n.MaxIndex.Load()}
		sn.Bound = o.RSSBound(sn.Index)
		res.Nodes = append(res.Nodes, sn)
		if r := float64(sn.MaxRSS) / float64(sn.Bound); r > worst {
			worst, res.MaxRSS, res.RSSBound = r, sn.MaxRSS, sn.Bound
		}
		if sn.MaxRSS > sn.Bound {
			res.RSSExceeded = true
		}
	}
	return res
}

// Report turns a result into rows: one "soak" row with the verdict,
// one "soak_node" row per node and one "soak_window" row per window.
func Report(res *Result) *bench.Report {
	r := &bench.Report{Columns: []string{"name", "node", "t_s", "requests", "errors", "p99_get_ms", "p99_put_ms", "max_rss_bytes", "rss_bound_bytes"}}
	r.Human = bench.HumanColumns["soak"]
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	errs, byOp := map[string]any{}, map[string]any{}
	var total int64
	for k, v := range res.Errors {
		errs[k] = v
		total += v
	}
	for k, v := range res.ErrorsByOp {
		byOp[k] = v
	}
	nodes := len(res.Nodes)
	row := bench.Row{
		"name": "soak", "requests": res.Requests, "hits": res.Hits, "misses": res.Misses,
		"errors": errs, "errors_by_op": byOp, "error_total": total, "errors_outside_restarts": res.ErrorsOutsideRestarts,
		"corrupt_reads": res.CorruptReads, "stale_after_restart": res.StaleAfterRestart,
		"lost_writes": res.LostWrites, "durable_acked": res.DurableAcked, "durable_checked": res.DurableChecked,
		"durable_in_dram": res.DurableInDRAM, "durable_bytes": res.DurableBytes,
		"max_rss_bytes": res.MaxRSS, "rss_bound_bytes": res.RSSBound, "rss_exceeded": res.RSSExceeded,
		"duration_s": res.Duration.Seconds(), "kills": res.Kills, "restart_retries": res.RestartRetries,
		"max_downtime_s": res.MaxDowntime.Seconds(), "nodes": nodes, "cluster": res.Cluster,
		"dram_capacity": res.DRAM, "ssd_capacity": res.SSD, "max_inflight_bytes": res.MaxInflight,
		"working_set_bytes": res.WorkingSet, "put_bytes": res.PutBytes,
		"p99_get_ms": ms(res.P99Get), "p99_put_ms": ms(res.P99Put), "passed": !res.Failed(),
	}
	if rt := res.Router; rt != nil {
		soakRouterRow(row, rt)
	}
	if res.S3 != nil {
		soakS3Row(row, res.S3)
	}
	if len(res.NodeLog) > 0 {
		logged := map[string]any{}
		for k, v := range res.NodeLog {
			logged[k] = v
		}
		row["node_log"] = logged
	}
	if len(res.Corrupt) > 0 {
		row["corrupt_examples"] = strings.Join(res.Corrupt, "; ")
	}
	if len(res.Lost) > 0 {
		row["lost_examples"] = strings.Join(res.Lost, "; ")
	}
	r.Add(row)
	for _, n := range res.Nodes {
		r.Add(bench.Row{"name": "soak_node", "node": n.Name, "starts": n.Starts, "max_rss_bytes": n.MaxRSS,
			"index_bytes": n.Index, "rss_bound_bytes": n.Bound})
	}
	for _, w := range res.Windows {
		r.Add(bench.Row{"name": "soak_window", "t_s": w.Start.Seconds(), "requests": w.Requests, "errors": w.Errors,
			"p99_get_ms": ms(w.P99Get), "p99_put_ms": ms(w.P99Put), "max_rss_bytes": w.MaxRSS, "kills": w.Kills})
	}
	return r
}

// soakRand is a worker's random source.
func soakRand(seed uint64, id int) *rand.Rand { return rand.New(rand.NewPCG(seed, uint64(id)+1)) }

// soakRouterRow adds the router part's figures to the soak row.
func soakRouterRow(row bench.Row, rt *Router) {
	asAny := func(m map[string]int64) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	metrics := map[string]any{}
	for k, v := range rt.RouterMetrics {
		metrics[k] = v
	}
	row["engines"] = rt.Engines
	row["router_requests"] = rt.Requests
	row["router_status"] = asAny(rt.Status)
	row["router_by_kind"] = asAny(rt.ByKind)
	row["router_served_by"] = asAny(rt.ServedBy)
	row["router_prefix_hits"] = asAny(rt.PrefixHits)
	row["router_prefix_tokens"] = rt.PrefixTokens
	row["router_prompt_tokens"] = rt.PromptTokens
	row["router_metrics"] = metrics
	row["engine_kills"] = rt.EngineKills
	row["engine_restart_retries"] = rt.RestartRetries
	row["engine_recovered"] = rt.Recovered
	row["engine_recovered_with_hits"] = rt.RecoveredWithHits
	row["engine_max_recovery_s"] = rt.MaxRecovery.Seconds()
	row["router_5xx_not_503"] = rt.Bad5xx
	row["router_503_outside_outage"] = rt.Outside503
	row["router_bad_answers"] = rt.BadAnswers
	row["engine_unrecovered"] = rt.Unrecovered
	row["router_exited"] = rt.RouterExited
	if len(rt.Faults) > 0 {
		row["router_faults"] = strings.Join(rt.Faults, "; ")
	}
}
