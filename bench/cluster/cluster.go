package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/cluster"
	"github.com/yuebing/yuebing/replicate"
	"github.com/yuebing/yuebing/server"
)

// Options configures the cluster benchmark: a trace replayed against
// real nodes (in this process, each with its own listeners, store and etcd
// membership) through the HTTP API.
type Options struct {
	// Trace to replay. Required.
	Trace *bench.Trace
	// Nodes is the number of nodes. Default 3.
	Nodes int
	// DRAMCapacity is each node's DRAM tier, in bytes. Default 96 MiB:
	// 6144 blocks of 16 KiB, the paper's 3M tokens of 512-token blocks.
	DRAMCapacity int64
	// BlockBytes is the value stored per trace block: a stand-in for the
	// block's KV, small so the pool holds the trace's working set at a
	// scale this machine can replay. Default 16 KiB.
	BlockBytes int
	// Requests replays at most this many requests of the trace; 0 all.
	Requests int
	// Routing is RoutePrefix (default: cache-aware) or RouteRoundRobin.
	Routing string
	// Slack is how far over its fair share of requests a node may go
	// before routing passes it over for the next best (as bench pool
	// does). Default 0.1; negative means 0.
	Slack float64
	// Samples is how many times replica counts are sampled over the
	// replay. Default 20.
	Samples int
	// Ranks are the top-N sets whose mean replica counts are reported.
	// Default 10, 100, 1000.
	Ranks []int
	// HotHits, MaxReplicas and Window tune the leader's replication core
	// (0: its defaults).
	HotHits     int
	MaxReplicas int
	Window      time.Duration
	// GetSize is the block size of the cross-node GET measurement. Default
	// 1 MiB.
	GetSize int
	// GetDuration is how long each GET measurement runs. Default 3s.
	GetDuration time.Duration
	// GetWorkers is the number of concurrent GETs. Default 4.
	GetWorkers int
	// Binary, when set, is the yuebing executable: the GET and put
	// measurements then run on node processes started from it (see
	// cluster_procs.go). Empty: in this process, as the replays.
	Binary string
	// Progress draws progress bars on stderr.
	Progress bool
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.DRAMCapacity == 0 {
		o.DRAMCapacity = 96 << 20
	}
	if o.BlockBytes == 0 {
		o.BlockBytes = 16 << 10
	}
	if o.Routing == "" {
		o.Routing = RoutePrefix
	}
	if o.Slack == 0 {
		o.Slack = 0.1
	}
	o.Slack = max(o.Slack, 0)
	if o.Samples == 0 {
		o.Samples = 20
	}
	if len(o.Ranks) == 0 {
		o.Ranks = []int{10, 100, 1000}
	}
	if o.GetSize == 0 {
		o.GetSize = 1 << 20
	}
	if o.GetDuration == 0 {
		o.GetDuration = 3 * time.Second
	}
	if o.GetWorkers == 0 {
		o.GetWorkers = 4
	}
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	var errs []error
	if o.Trace == nil {
		errs = append(errs, errors.New("bench: cluster: a trace is required"))
	}
	if o.Nodes < 2 || o.Nodes > 16 {
		errs = append(errs, fmt.Errorf("bench: cluster: %d nodes, want 2 to 16", o.Nodes))
	}
	if o.DRAMCapacity < 1<<20 {
		errs = append(errs, fmt.Errorf("bench: cluster: DRAM capacity %d, want at least 1 MiB", o.DRAMCapacity))
	}
	if o.BlockBytes < 1 || int64(o.BlockBytes) > o.DRAMCapacity/4 {
		errs = append(errs, fmt.Errorf("bench: cluster: block bytes %d, want 1 to a quarter of the DRAM capacity", o.BlockBytes))
	}
	if o.Requests < 0 || o.Samples < 1 || o.GetSize < 1 || o.GetSize > 64<<20 || o.GetDuration <= 0 || o.GetWorkers < 1 {
		errs = append(errs, errors.New("bench: cluster: requests, samples, get size (at most 64 MiB), get duration and get workers must be positive"))
	}
	if o.Routing != RoutePrefix && o.Routing != RouteRoundRobin {
		errs = append(errs, fmt.Errorf("bench: cluster: routing %q: want %q or %q", o.Routing, RoutePrefix, RouteRoundRobin))
	}
	// The replication core takes hot hits as a uint32: a negative count
	// must not wrap into a huge one.
	if o.HotHits < 0 || int64(o.HotHits) > math.MaxUint32 || o.MaxReplicas < 0 || o.Window < 0 {
		errs = append(errs, fmt.Errorf("bench: cluster: hot hits %d, max replicas %d and window %v must not be negative (0: the core's defaults)", o.HotHits, o.MaxReplicas, o.Window))
	}
	for _, r := range o.Ranks {
		if r < 1 || r > 4096 {
			errs = append(errs, fmt.Errorf("bench: cluster: rank %d, want 1 to 4096", r))
		}
	}
	return errors.Join(errs...)
}

// Sample is the replica counts of the top keys at one point of a
// replay.
type Sample struct {
	// At is the trace time of the request the sample follows.
	At time.Duration
	// Mean[i] is the mean replica count of the top Ranks[i] keys (by
	// accesses in the replayed part of the trace).
	Mean []float64
	// Max is the most replicas any top key has.
	Max int
}

// Run is one replay: Mode "local" counts only blocks the serving
// node holds itself, "cluster" also blocks read from other nodes.
type Run struct {
	Mode string
	// Requests replayed; Blocks asked for; LocalHits and RemoteHits the
	// prefix blocks served from the node itself and from other nodes.
	Requests, Blocks, LocalHits, RemoteHits int64
	Elapsed                                 time.Duration
	Samples                                 []Sample
	// Copies and Drops are the leader's replication actions.
	Copies, Drops int64
}

// HitRate is the share of blocks found as prefix hits.
func (r *Run) HitRate() float64 {
	return bench.Ratio(float64(r.LocalHits+r.RemoteHits), float64(r.Blocks))
}

// Get is a GET throughput measurement.
type Get struct {
	Name          string
	Bytes, Blocks int64
	Elapsed       time.Duration
}

// GBps is the measured throughput in GB/s.
func (g Get) GBps() float64 { return float64(g.Bytes) / g.Elapsed.Seconds() / 1e9 }

// Result is what Cluster measured.
type Result struct {
	Runs []Run
	// Local and Remote are GETs of the same blocks from their holder and
	// from another node.
	Local, Remote Get
	// LocalPrefix and RemotePrefix are multi-gets of a 64-block prefix
	// from its holder and from another node.
	LocalPrefix, RemotePrefix Get
	// PutCluster and PutSingle are sequential PUTs on a cluster node (each
	// registered with the leader before its answer) and on a node without
	// a cluster, in the same run.
	PutCluster, PutSingle PutLatency
}

// PutLatency is a sequential PUT measurement.
type PutLatency struct {
	Name     string
	Puts     int
	Elapsed  time.Duration
	P50, P99 time.Duration
}

// PerSecond is the measured PUT rate.
func (p PutLatency) PerSecond() float64 { return float64(p.Puts) / p.Elapsed.Seconds() }

// prefixBlocks and prefixBlockBytes shape the prefix measurement: a
// 64-block prefix of 64 KiB blocks, a 4 MiB multi-get.
const (
	prefixBlocks     = 64
	prefixBlockBytes = 64 << 10
)

const clusterNS = "bench/trace"

// Routing of the cluster benchmark's requests.
const (
	// RoutePrefix sends a request to the node holding the longest prefix
	// of it, within the fair-share slack.
	RoutePrefix = "prefix"
	// RouteRoundRobin deals requests in turn, as a cache-blind balancer.
	RouteRoundRobin = "round-robin"
)

// benchCluster is N in-process nodes sharing an embedded etcd.
type benchCluster struct {
	dir     string
	etcd    *cluster.Embedded
	nodes   []*server.Node
	procs   []*bench.Node // node processes, instead of nodes
	clients []*client.Client
}

func startBenchCluster(o *Options, admit string) (*benchCluster, error) {
	dir, err := bench.TempDir()
	if err != nil {
		return nil, err
	}
	bc := &benchCluster{dir: dir}
	bc.etcd, err = cluster.StartEmbedded(cluster.EmbedOptions{Dir: filepath.Join(dir, "etcd"), ClientListen: "127.0.0.1:0", PeerListen: "127.0.0.1:0"})
	if err != nil {
		bc.close()
		return nil, err
	}
	for i := range o.Nodes {
		cfg := server.DefaultConfig()
		cfg.HTTP.Listen, cfg.RESP.Listen, cfg.Transfer.Listen = "127.0.0.1:0", "", "127.0.0.1:0"
		cfg.DataDir = filepath.Join(dir, fmt.Sprintf("node%d", i))
		cfg.DRAM.Capacity = server.ByteSize(o.DRAMCapacity)
		// A token SSD tier: the pool under test is DRAM.
		cfg.SSD.Capacity, cfg.SSD.NoSync = 4<<20, true
		cfg.Limits.MaxBlockSize = server.ByteSize(max(o.GetSize, o.BlockBytes))
		cfg.Conductor.Enabled = false
		cfg.Banner = io.Discard
		cfg.Logger = slog.New(slog.DiscardHandler)
		cfg.Cluster = server.ClusterConfig{Options: cluster.Options{
			Cluster: "bench", NodeName: fmt.Sprintf("node%d", i), Endpoints: cluster.Endpoints{bc.etcd.Endpoint()},
			ReportInterval: 50 * time.Millisecond, Admit: admit,
			MaxFetchBytes: server.ByteSize(max(256<<20, o.GetSize)),
			Replication:   replicate.Options{HotHits: uint32(o.HotHits), MaxReplicas: o.MaxReplicas, Window: o.Window},
		}}
		n, err := server.Start(cfg)
		if err != nil {
			bc.close()
			return nil, err
		}
		bc.nodes = append(bc.nodes, n)
		c, err := client.New("http://"+n.Addr("http").String(), client.Options{})
		if err != nil {
			bc.close()
			return nil, err
		}
		bc.clients = append(bc.clients, c)
	}
	// Wait until the leader has every node's full state.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := bc.nodes[0].Cluster().Status(context.Background())
		if st.LeaderStatus != nil && len(st.LeaderStatus.Nodes) == o.Nodes {
			return bc, nil
		}
		if time.Now().After(deadline) {
			bc.close()
			return nil, errors.New("bench: cluster: the nodes did not form a cluster within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (bc *benchCluster) close() {
	for _, n := range bc.nodes {
		n.Shutdown()
	}
	for _, n := range bc.procs {
		n.Stop()
	}
	if bc.etcd != nil {
		bc.etcd.Close()
	}
	bench.RemoveAll(bc.dir)
}

func (bc *benchCluster) name(i int) string { return fmt.Sprintf("node%d", i) }

// Cluster replays the trace on a fresh cluster twice: counting only hits
// on the serving node (local) and counting blocks read from other nodes too
// (cluster); then measures GETs of blocks held by one node, from it and from
// another node, on a fresh two-node cluster that does not admit what it
// fetches (so every remote GET crosses the transfer service).
func Simulate(ctx context.Context, o Options) (*Result, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	res := &Result{}
	for _, mode := range []string{"local", "cluster"} {
		// Local: per-node caches, as without a cluster: no reads from
		// other nodes, nothing admitted, no replication (the index only
		// routes). Cluster: the pool and hot-block replication.
		admit, oo := cluster.AdmitNever, o
		if mode == "cluster" {
			admit = cluster.AdmitSecondHit
		} else {
			oo.HotHits = 1 << 30
		}
		bc, err := startBenchCluster(&oo, admit)
		if err != nil {
			return nil, err
		}
		run, err := replayCluster(ctx, bc, &o, mode)
		bc.close()
		if err != nil {
			return nil, err
		}
		res.Runs = append(res.Runs, run)
	}
	two := o
	two.Nodes = 2
	two.DRAMCapacity = max(o.DRAMCapacity, 64*int64(o.GetSize)+64<<20)
	// No hot replication either: the GETs would make their blocks hot and
	// the leader would copy them to the reading node.
	two.HotHits = 1 << 30
	var bc *benchCluster
	var err error
	if o.Binary != "" {
		bc, err = startProcCluster(ctx, &two, cluster.AdmitNever)
	} else {
		bc, err = startBenchCluster(&two, cluster.AdmitNever)
	}
	if err != nil {
		return nil, err
	}
	defer bc.close()
	if res.Local, res.Remote, err = measureClusterGets(ctx, bc, &o); err != nil {
		return res, err
	}
	if res.LocalPrefix, res.RemotePrefix, err = measurePrefixGets(ctx, bc, &o); err != nil {
		return res, err
	}
	res.PutCluster, res.PutSingle, err = measurePuts(ctx, bc, &o)
	return res, err
}

// waitIndexed waits until node 1 finds every key in the leader's index.
func waitIndexed(ctx context.Context, bc *benchCluster, keys []block.Key) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		hs, err := bc.clients[1].ClusterHolders(ctx, keys)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(hs, func(h []client.Holder) bool { return len(h) == 0 }) {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("bench: cluster: blocks not indexed within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// measurePrefixGets puts a 64-block chain on node 0 and multi-gets it
// whole for GetDuration from node 0 (local) and from node 1 (one round
// trip to the leader and one to node 0 per multi-get).
func measurePrefixGets(ctx context.Context, bc *benchCluster, o *Options) (local, remote Get, err error) {
	keys := make([]block.Key, prefixBlocks)
	items := make([]client.Item, prefixBlocks)
	for i := range keys {
		keys[i] = bench.Key(1<<41 + uint64(i))
		items[i] = client.Item{Key: keys[i], Data: blockValue(make([]byte, prefixBlockBytes), int32(i))}
	}
	if _, err := bc.clients[0].PutBatch(ctx, clusterNS, items); err != nil {
		return local, remote, err
	}
	if err := waitIndexed(ctx, bc, keys); err != nil {
		return local, remote, err
	}
	get := func(name string, c *client.Client, remote bool) (Get, error) {
		g := Get{Name: name}
		gctx, cancel := context.WithTimeout(ctx, o.GetDuration)
		defer cancel()
		start := time.Now()
		for gctx.Err() == nil {
			n := 0
			err := c.GetBatch(gctx, clusterNS, keys, func(f client.Frame, r io.Reader) error {
				m, err := io.Copy(io.Discard, r)
				if err != nil {
					return err
				}
				if f.Missing || remote != (f.Tier == client.TierRemote) {
					return fmt.Errorf("bench: cluster: prefix block %d missing %v, tier %d", n, f.Missing, f.Tier)
				}
				g.Bytes += m
				n++
				return nil
			})
			if err != nil {
				if gctx.Err() != nil {
					break
				}
				return g, err
			}
			g.Blocks += int64(n)
		}
		g.Elapsed = time.Since(start)
		return g, nil
	}
	if local, err = get("local_prefix_get", bc.clients[0], false); err != nil {
		return local, remote, err
	}
	remote, err = get("cross_node_prefix_get", bc.clients[1], true)
	return local, remote, err
}

// measurePuts times sequential 64 KiB PUTs on a cluster node that does not
// lead and on a node that runs alone, as many as fit in GetDuration each.
func measurePuts(ctx context.Context, bc *benchCluster, o *Options) (withCluster, single PutLatency, err error) {
	sc, stop, err := bc.startSingle(ctx, o)
	if err != nil {
		return withCluster, single, err
	}
	defer stop()
	data := make([]byte, prefixBlockBytes)
	put := func(name string, c *client.Client, base uint64) (PutLatency, error) {
		p := PutLatency{Name: name}
		var lat []time.Duration
		pctx, cancel := context.WithTimeout(ctx, o.GetDuration)
		defer cancel()
		start := time.Now()
		for i := uint64(0); pctx.Err() == nil; i++ {
			blockValue(data, int32(i))
			t0 := time.Now()
			if _, err := c.Put(pctx, clusterNS, bench.Key(base+i), data); err != nil {
				if pctx.Err() != nil {
					break
				}
				return p, err
			}
			lat = append(lat, time.Since(t0))
		}
		p.Elapsed, p.Puts = time.Since(start), len(lat)
		if len(lat) > 0 {
			slices.Sort(lat)
			p.P50, p.P99 = lat[len(lat)/2], lat[len(lat)*99/100]
		}
		return p, nil
	}
	if single, err = put("put_single", sc, 1<<42); err != nil {
		return withCluster, single, err
	}
	// On a node that does not lead, as most nodes of a cluster: each put
	// waits for the leader to take its registration.
	writer := bc.clients[0]
	if name, ok := bc.leaderName(ctx); ok && name == bc.name(0) {
		writer = bc.clients[1]
	}
	withCluster, err = put("put_cluster", writer, 1<<43)
	return withCluster, single, err
}

// blockValue is the deterministic value of a trace block.
func blockValue(buf []byte, id int32) []byte {
	for i := 0; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], uint64(id)*0x9e3779b97f4a7c15^uint64(i))
	}
	return buf
}

func replayCluster(ctx context.Context, bc *benchCluster, o *Options, mode string) (Run, error) {
	t := o.Trace
	nreq := t.Requests()
	if o.Requests > 0 {
		nreq = min(nreq, o.Requests)
	}
	// The top keys by accesses in the replayed requests.
	counts := make([]int64, t.Blocks())
	for i := range nreq {
		ids, _ := t.Request(i)
		for _, id := range ids {
			counts[id]++
		}
	}
	maxRank := slices.Max(o.Ranks)
	top := bench.TopBlocks(counts, maxRank)
	topKeys := make([]block.Key, len(top))
	for i, id := range top {
		topKeys[i] = bench.IDKey(id)
	}
	run := Run{Mode: mode}
	var bar *bench.Progress
	if o.Progress {
		bar = bench.NewProgress("cluster "+mode, int64(nreq))
		defer bar.Done()
	}
	every := max(1, nreq/o.Samples)
	load := make([]int, len(bc.nodes)) // requests routed to each node
	start := time.Now()
	for i := range nreq {
		if err := ctx.Err(); err != nil {
			return run, err
		}
		ids, _ := t.Request(i)
		if len(ids) == 0 {
			continue
		}
		keys := make([]block.Key, len(ids))
		for j, id := range ids {
			keys[j] = bench.IDKey(id)
		}
		n := i % len(bc.nodes)
		if o.Routing == RoutePrefix {
			var err error
			if n, err = route(ctx, bc, keys, i, load, o.Slack); err != nil {
				return run, err
			}
		}
		load[n]++
		local, remote, err := serveRequest(ctx, bc, n, ids, keys, o.BlockBytes, mode == "cluster")
		if err != nil {
			return run, fmt.Errorf("bench: cluster: request %d on %s: %w", i, bc.name(n), err)
		}
		run.Requests++
		run.Blocks += int64(len(ids))
		run.LocalHits += int64(local)
		run.RemoteHits += int64(remote)
		if (i+1)%every == 0 || i == nreq-1 {
			s, err := sampleReplicas(ctx, bc, topKeys, o.Ranks)
			if err != nil {
				return run, err
			}
			s.At = t.Arrival(i)
			run.Samples = append(run.Samples, s)
		}
		if bar != nil {
			bar.Add(1)
		}
	}
	run.Elapsed = time.Since(start)
	if ls := bc.nodes[0].Cluster().Status(ctx).LeaderStatus; ls != nil {
		run.Copies, run.Drops = ls.Replication.Copies, ls.Replication.Drops
	}
	return run, nil
}

// route picks the node for request i, cache-aware: of the nodes not
// already slack over their fair share of requests, the one holding the
// longest prefix of its blocks by the cluster's prefix query, the least
// loaded among equals. The bound is what makes a pool matter: without it
// every request would follow a shared prefix to one node.
func route(ctx context.Context, bc *benchCluster, keys []block.Key, i int, load []int, slack float64) (int, error) {
	ms, err := bc.clients[i%len(bc.clients)].ClusterQuery(ctx, keys)
	if err != nil {
		return 0, err
	}
	prefix := make([]int, len(bc.nodes))
	for _, m := range ms {
		for idx := range bc.nodes {
			if bc.name(idx) == m.Name {
				prefix[idx] = m.PrefixLen
			}
		}
	}
	fair := float64(i)/float64(len(bc.nodes))*(1+slack) + 1
	node, best := i%len(bc.nodes), -1
	for j := range bc.nodes {
		if float64(load[j]) > fair {
			continue
		}
		if prefix[j] > best || (prefix[j] == best && load[j] < load[node]) {
			node, best = j, prefix[j]
		}
	}
	return node, nil
}

// serveRequest plays one request on node n: the prefix the node holds is
// read from it, then (in a cluster) the prefix held elsewhere is read
// through the node, and the rest is "computed" and stored there.
func serveRequest(ctx context.Context, bc *benchCluster, n int, ids []int32, keys []block.Key, size int, remote bool) (local, fetched int, err error) {
	c := bc.clients[n]
	m, err := c.Exists(ctx, clusterNS, keys)
	if err != nil {
		return 0, 0, err
	}
	local = m.PrefixLen
	buf := make([]byte, size)
	j := 0
	for ; j < len(keys); j++ {
		if j >= local && !remote {
			break
		}
		data, info, err := c.Get(ctx, keys[j], client.GetOptions{})
		if errors.Is(err, client.ErrNotFound) {
			if j < local {
				local = j // evicted since the check
			}
			break
		}
		if err != nil {
			return 0, 0, err
		}
		if string(data) != string(blockValue(buf, ids[j])) {
			return 0, 0, fmt.Errorf("block %s: wrong bytes from %s", keys[j], info.Source)
		}
		if j >= local {
			fetched++
		}
	}
	if j < len(keys) {
		items := make([]client.Item, 0, len(keys)-j)
		for ; j < len(keys); j++ {
			items = append(items, client.Item{Key: keys[j], Data: blockValue(make([]byte, size), ids[j])})
		}
		res, err := c.PutBatch(ctx, clusterNS, items)
		if err != nil && len(res) != len(items) {
			return 0, 0, err
		}
		for _, r := range res {
			// A block the store could not keep (evicted again while being
			// put, no room) is a cache miss next time, not a failure.
			if r.Err != nil && !errors.Is(r.Err, client.ErrConflict) && !errors.Is(r.Err, client.ErrNoSpace) {
				return 0, 0, r.Err
			}
		}
	}
	return local, fetched, nil
}

func sampleReplicas(ctx context.Context, bc *benchCluster, keys []block.Key, ranks []int) (Sample, error) {
	hs, err := bc.clients[0].ClusterHolders(ctx, keys)
	if err != nil {
		return Sample{}, err
	}
	s := Sample{Mean: make([]float64, len(ranks))}
	for ri, r := range ranks {
		sum := 0
		for i := 0; i < r && i < len(hs); i++ {
			sum += len(hs[i])
		}
		s.Mean[ri] = bench.Ratio(float64(sum), float64(min(r, len(hs))))
	}
	for _, h := range hs {
		s.Max = max(s.Max, len(h))
	}
	return s, nil
}

// measureClusterGets puts blocks on node 0 and GETs them for GetDuration
// from node 0 (local) and from node 1 (each GET a transfer from node 0).
func measureClusterGets(ctx context.Context, bc *benchCluster, o *Options) (local, remote Get, err error) {
	const blocks = 32
	keys := make([]block.Key, blocks)
	for i := range keys {
		keys[i] = bench.Key(1<<40 + uint64(i))
		data := blockValue(make([]byte, o.GetSize), int32(i))
		if _, err := bc.clients[0].Put(ctx, clusterNS, keys[i], data); err != nil {
			return local, remote, err
		}
	}
	if err := waitIndexed(ctx, bc, keys); err != nil {
		return local, remote, err
	}
	get := func(name string, c *client.Client, want string) (Get, error) {
		g := Get{Name: name}
		var bytes, n atomic.Int64
		var firstErr error
		var once sync.Once
		gctx, cancel := context.WithTimeout(ctx, o.GetDuration)
		defer cancel()
		start := time.Now()
		var wg sync.WaitGroup
		for w := range o.GetWorkers {
			wg.Go(func() {
				for i := w; gctx.Err() == nil; i++ {
					data, info, err := c.Get(gctx, keys[i%blocks], client.GetOptions{})
					if err != nil {
						if gctx.Err() == nil {
							once.Do(func() { firstErr = err })
						}
						return
					}
					if info.Source != want {
						once.Do(func() { firstErr = fmt.Errorf("GET served by %q, want %q", info.Source, want) })
						return
					}
					bytes.Add(int64(len(data)))
					n.Add(1)
				}
			})
		}
		wg.Wait()
		g.Elapsed, g.Bytes, g.Blocks = time.Since(start), bytes.Load(), n.Load()
		return g, firstErr
	}
	if local, err = get("local_get", bc.clients[0], bc.name(0)); err != nil {
		return local, remote, err
	}
	remote, err = get("cross_node_get", bc.clients[1], bc.name(0))
	return local, remote, err
}

// Report turns a result into rows: one per replay, one per GET
// measurement (the remote one with the local one as its baseline), and one
// per replica sample.
func Report(res *Result, o Options) *bench.Report {
	o.EnsureDefaults()
	r := &bench.Report{Columns: []string{"name", "trace", "nodes", "requests", "blocks", "hit_rate", "baseline_hit_rate", "ratio",
		"local_hits", "remote_hits", "copies", "drops", "gbps", "baseline_gbps", "puts_per_s", "p50_us", "p99_us", "t_s"}}
	r.Human = bench.HumanColumns["cluster"]
	for _, rank := range o.Ranks {
		r.Columns = append(r.Columns, fmt.Sprintf("mean_top%d", rank))
	}
	var local *Run
	for i := range res.Runs {
		run := &res.Runs[i]
		row := bench.Row{
			"name": "replay_" + run.Mode, "trace": o.Trace.Name, "nodes": o.Nodes, "routing": o.Routing, "slack": o.Slack, "requests": run.Requests,
			"blocks": run.Blocks, "hit_rate": run.HitRate(), "local_hits": run.LocalHits, "remote_hits": run.RemoteHits,
			"copies": run.Copies, "drops": run.Drops, "seconds": run.Elapsed.Seconds(),
		}
		if run.Mode == "local" {
			local = run
		} else if local != nil {
			row["baseline"] = "replay_local"
			row["baseline_hit_rate"] = local.HitRate()
			row["ratio"] = bench.Ratio(run.HitRate(), local.HitRate())
		}
		r.Add(row)
	}
	r.Add(bench.Row{"processes": o.Binary != "", "name": res.Local.Name, "gbps": res.Local.GBps(), "blocks": res.Local.Blocks, "block_bytes": o.GetSize, "workers": o.GetWorkers})
	r.Add(bench.Row{"processes": o.Binary != "", "name": res.Remote.Name, "gbps": res.Remote.GBps(), "blocks": res.Remote.Blocks, "block_bytes": o.GetSize, "workers": o.GetWorkers,
		"baseline": res.Local.Name, "baseline_gbps": res.Local.GBps(), "ratio": bench.Ratio(res.Remote.GBps(), res.Local.GBps())})
	r.Add(bench.Row{"processes": o.Binary != "", "name": res.LocalPrefix.Name, "gbps": res.LocalPrefix.GBps(), "blocks": res.LocalPrefix.Blocks, "block_bytes": prefixBlockBytes, "prefix_blocks": prefixBlocks})
	r.Add(bench.Row{"processes": o.Binary != "", "name": res.RemotePrefix.Name, "gbps": res.RemotePrefix.GBps(), "blocks": res.RemotePrefix.Blocks, "block_bytes": prefixBlockBytes, "prefix_blocks": prefixBlocks,
		"baseline": res.LocalPrefix.Name, "baseline_gbps": res.LocalPrefix.GBps(), "ratio": bench.Ratio(res.RemotePrefix.GBps(), res.LocalPrefix.GBps())})
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	r.Add(bench.Row{"processes": o.Binary != "", "name": res.PutSingle.Name, "block_bytes": prefixBlockBytes, "puts_per_s": res.PutSingle.PerSecond(),
		"p50_us": us(res.PutSingle.P50), "p99_us": us(res.PutSingle.P99)})
	r.Add(bench.Row{"processes": o.Binary != "", "name": res.PutCluster.Name, "block_bytes": prefixBlockBytes, "puts_per_s": res.PutCluster.PerSecond(),
		"p50_us": us(res.PutCluster.P50), "p99_us": us(res.PutCluster.P99),
		"baseline": res.PutSingle.Name, "baseline_puts_per_s": res.PutSingle.PerSecond(), "ratio": bench.Ratio(res.PutCluster.PerSecond(), res.PutSingle.PerSecond())})
	for _, run := range res.Runs {
		for _, s := range run.Samples {
			row := bench.Row{"name": "replicas_" + run.Mode, "t_s": s.At.Seconds(), "max_replicas": s.Max}
			for i, rank := range o.Ranks {
				row[fmt.Sprintf("mean_top%d", rank)] = s.Mean[i]
			}
			r.Add(row)
		}
	}
	return r
}

// startSingleInProcess starts the put baseline's node in this process.
func startSingleInProcess(bc *benchCluster, o *Options) (*client.Client, func(), error) {
	cfg := server.DefaultConfig()
	cfg.HTTP.Listen, cfg.RESP.Listen, cfg.Transfer.Listen = "127.0.0.1:0", "", ""
	cfg.DataDir = filepath.Join(bc.dir, "single")
	cfg.DRAM.Capacity = server.ByteSize(max(o.DRAMCapacity, 64<<20))
	cfg.SSD.Capacity, cfg.SSD.NoSync = 4<<20, true
	cfg.Conductor.Enabled = false
	cfg.Banner = io.Discard
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := server.Start(cfg)
	if err != nil {
		return nil, nil, err
	}
	sc, err := client.New("http://"+n.Addr("http").String(), client.Options{})
	if err != nil {
		n.Shutdown()
		return nil, nil, err
	}
	return sc, func() { n.Shutdown() }, nil
}

// ThinSamples keeps every row of r but every n-th replica sample of each
// replay, for a table a person reads (the JSON keeps them all).
func ThinSamples(r *bench.Report, n int) *bench.Report {
	return bench.ThinSamples(r, n, func(row bench.Row) any { return row["name"] })
}
