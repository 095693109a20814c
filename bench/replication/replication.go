package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/replicate"
	"github.com/yuebing/yuebing/tier/policy"
)

// Setups of the replication simulation.
const (
	// SetupReplicate runs the replication core and executes its actions.
	SetupReplicate = "replicate"
	// SetupNoReplication is the same run without the core: replicas come
	// only from nodes recomputing blocks that another node holds.
	SetupNoReplication = "no-replication"
)

// Orders of Options.RankBy.
const (
	RankByReplicas = "replicas"
	RankByAccesses = "accesses"
)

// Options configures the trace-driven replication simulation.
type Options struct {
	// Traces to replay. Required.
	Traces []*bench.Trace
	// Nodes is the number of simulated nodes. Default 10.
	Nodes int
	// NodeCapacity is each node's cache in tokens. Default 3M (the
	// paper's one node of DRAM).
	NodeCapacity int64
	// Tick is how often the core ticks and nodes report hits and figures,
	// in trace time. Default 1s.
	Tick time.Duration
	// Sample is how often replica counts are recorded. Default 30s, as in
	// the paper's Figure 11.
	Sample time.Duration
	// Ranks are the ranks of the keys whose replica counts are reported,
	// 1 the first. Default 10, 100, 1000.
	Ranks []int
	// RankBy orders the keys: RankByReplicas (the default), as the paper's
	// Figure 11 does, by replica counts summed over all samples; or
	// RankByAccesses, by accesses over the whole trace.
	RankBy string
	// Core configures the replication core; zero fields take its
	// defaults. Sizes are in blocks, so DefaultBlockSize is set to 1.
	Core replicate.Options
	// Workers bounds the simulations run at once. Default: GOMAXPROCS.
	Workers int
	// Progress draws a progress bar on stderr. Default: off.
	Progress bool
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Nodes == 0 {
		o.Nodes = 10
	}
	if o.NodeCapacity == 0 {
		o.NodeCapacity = 3_000_000
	}
	if o.Tick == 0 {
		o.Tick = time.Second
	}
	if o.Sample == 0 {
		o.Sample = 30 * time.Second
	}
	if o.Ranks == nil {
		o.Ranks = []int{10, 100, 1000}
	}
	if o.RankBy == "" {
		o.RankBy = RankByReplicas
	}
	o.Core.DefaultBlockSize = 1
	o.Core.EnsureDefaults()
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	if len(o.Traces) == 0 {
		errs = append(errs, fmt.Errorf("%w: no trace", bench.ErrOptions))
	}
	if o.Nodes < 1 || o.Nodes > 1024 {
		errs = append(errs, fmt.Errorf("%w: %d nodes, want 1 to 1024", bench.ErrOptions, o.Nodes))
	}
	if o.NodeCapacity < bench.TraceBlockTokens {
		errs = append(errs, fmt.Errorf("%w: node capacity %d tokens is less than one %d-token block", bench.ErrOptions, o.NodeCapacity, bench.TraceBlockTokens))
	}
	if o.Tick <= 0 || o.Sample < o.Tick {
		errs = append(errs, fmt.Errorf("%w: tick %v must be positive and at most the sample interval %v", bench.ErrOptions, o.Tick, o.Sample))
	}
	if o.RankBy != RankByReplicas && o.RankBy != RankByAccesses {
		errs = append(errs, fmt.Errorf("%w: rank by %q, want %q or %q", bench.ErrOptions, o.RankBy, RankByReplicas, RankByAccesses))
	}
	for _, r := range o.Ranks {
		if r < 1 {
			errs = append(errs, fmt.Errorf("%w: rank %d, ranks start at 1", bench.ErrOptions, r))
		}
	}
	if o.Core.Window < o.Tick {
		errs = append(errs, fmt.Errorf("%w: the core's window %v is shorter than a tick %v", bench.ErrOptions, o.Core.Window, o.Tick))
	}
	if err := o.Core.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", bench.ErrOptions, err))
	}
	return errors.Join(errs...)
}

// Sample is one point of the time series.
type Sample struct {
	At time.Duration
	// Replicas[i] is the number of nodes holding the key of rank Ranks[i]
	// (0 where the trace has fewer keys); MeanTop[i] is the mean over the
	// keys of ranks 1 to Ranks[i].
	Replicas []int
	MeanTop  []float64
	// Hot is the number of blocks the core tracks heat windows for.
	Hot int
	// Copies and Drops count the core's actions so far.
	Copies, Drops int64
}

// Run is one trace simulated in one setup.
type Run struct {
	Trace, Setup string
	Samples      []Sample
	// Blocks and HitBlocks count block accesses and prefix hits in the
	// global pool; RemoteHits are the hits served by another node.
	Blocks, HitBlocks, RemoteHits int64
	Copies, Drops                 int64
	// PeakFetches is the most remote fetches one node served in one tick.
	PeakFetches int
	// BusiestShare is the share of each tick's remote fetches served by
	// that tick's busiest node, averaged over ticks with fetches.
	BusiestShare float64
	// Ranked are the dense ids of the keys at ranks 1 to max(Ranks), as
	// far as the trace has keys.
	Ranked []int32
}

// LocalShare is the share of hits served by the requesting node itself.
func (r *Run) LocalShare() float64 {
	return bench.Ratio(float64(r.HitBlocks-r.RemoteHits), float64(r.HitBlocks))
}

// HitRate is the share of block accesses that hit the pool.
func (r *Run) HitRate() float64 { return bench.Ratio(float64(r.HitBlocks), float64(r.Blocks)) }

// Replication replays each trace over Nodes simulated nodes with and without
// the replication core and records the replica counts of the keys at
// Ranks every Sample, like the paper's Figure 11.
//
// The model: requests are dealt to nodes in turn (a load-balancing
// scheduler); a request's leading blocks that some node holds are hits,
// served by the node itself if it holds them, else fetched from the holder
// that served the fewest fetches this tick; its other blocks are computed and
// stored on the node. Each node is an LRU cache of NodeCapacity tokens. Every
// Tick, nodes report their hits and figures (Free: capacity not used within
// the heat window; Load: fetches served, relative to the busiest node) and
// the core's actions are executed at once.
func Simulate(ctx context.Context, o Options) ([]Run, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var runs []Run
	for _, t := range o.Traces {
		for _, s := range []string{SetupReplicate, SetupNoReplication} {
			runs = append(runs, Run{Trace: t.Name, Setup: s})
		}
	}
	var bar *bench.Progress
	if o.Progress {
		bar = bench.NewProgress("replication", int64(len(runs)))
		defer bar.Done()
	}
	err := bench.RunCells(ctx, len(runs), o.Workers, func(i int) error {
		err := simulateReplication(ctx, o.Traces[i/2], &o, &runs[i])
		if bar != nil {
			bar.Add(1)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return runs, nil
}

// replNode is one simulated node.
type replNode struct {
	lru  policy.Policy[int32]
	held []bool // by dense id
	used int64
	// lastUse[id] is 1 + the tick the node last used id. recent counts
	// held blocks by the tick of their last use, a ring over the heat
	// window, so recentSum is the blocks used within the window.
	lastUse   []int32
	recent    []int64
	recentSum int64
	served    int // remote fetches served this tick
	hits      []block.Key
}

// replSeries keeps every block's replica count at every sample until the
// run ends, when the ranking by replicas is known: 2 bytes per block and
// sample (43 MiB for the conversation trace's hour).
type replSeries struct {
	counts []uint16   // replica count of each block now
	cum    []int64    // summed over the samples so far
	snaps  [][]uint16 // counts at each sample
}

type replSim struct {
	t         *bench.Trace
	o         *Options
	run       *Run
	g         *index.Global
	core      *replicate.Core // nil without replication
	nodes     []replNode
	capacity  int64 // blocks per node
	window    int   // ticks per heat window
	tick      int32
	now       time.Time
	busiest   float64 // sum of busiest shares
	fetchTick int     // ticks with fetches
	series    replSeries
}

// replEpoch is time zero of a simulation.
var replEpoch = time.Unix(1_700_000_000, 0)

func simulateReplication(ctx context.Context, t *bench.Trace, o *Options, run *Run) error {
	s := &replSim{
		t:        t,
		o:        o,
		run:      run,
		g:        index.NewGlobal(index.GlobalOptions{MaxNodes: o.Nodes}),
		capacity: max(1, o.NodeCapacity/bench.TraceBlockTokens),
		window:   int(o.Core.Window / o.Tick),
		now:      replEpoch,
	}
	if run.Setup == SetupReplicate {
		var err error
		if s.core, err = replicate.NewCore(o.Core, s.g); err != nil {
			return fmt.Errorf("%w: %w", bench.ErrOptions, err)
		}
	}
	s.nodes = make([]replNode, o.Nodes)
	for i := range s.nodes {
		lru, err := policy.New[int32]("lru", s.capacity)
		if err != nil {
			return fmt.Errorf("%w: %w", bench.ErrOptions, err)
		}
		s.nodes[i] = replNode{
			lru:     lru,
			held:    make([]bool, t.Blocks()),
			lastUse: make([]int32, t.Blocks()),
			recent:  make([]int64, s.window),
		}
	}
	s.series.counts = make([]uint16, t.Blocks())
	s.series.cum = make([]int64, t.Blocks())
	nextSample := o.Sample
	for i := range t.Requests() {
		if i%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		for at := t.Arrival(i); time.Duration(s.tick+1)*o.Tick <= at; {
			s.doTick()
			if el := time.Duration(s.tick) * o.Tick; el >= nextSample {
				s.sample(el)
				nextSample += o.Sample
			}
		}
		s.request(i)
	}
	// One more sample covering the end of the trace.
	s.doTick()
	s.sample(time.Duration(s.tick) * o.Tick)
	score := s.series.cum
	if o.RankBy == RankByAccesses {
		score = accessCounts(t)
	}
	run.Ranked = bench.TopBlocks(score, slices.Max(o.Ranks))
	for i := range run.Samples {
		smp := &run.Samples[i]
		smp.Replicas = make([]int, len(o.Ranks))
		smp.MeanTop = make([]float64, len(o.Ranks))
		for j, rank := range o.Ranks {
			top := run.Ranked[:min(rank, len(run.Ranked))]
			if len(top) == rank {
				smp.Replicas[j] = int(s.series.snaps[i][top[rank-1]])
			}
			sum := 0
			for _, id := range top {
				sum += int(s.series.snaps[i][id])
			}
			smp.MeanTop[j] = bench.Ratio(float64(sum), float64(len(top)))
		}
	}
	if s.core != nil {
		st := s.core.Stats()
		run.Copies, run.Drops = st.Copies, st.Drops
	}
	if s.fetchTick > 0 {
		run.BusiestShare = s.busiest / float64(s.fetchTick)
	}
	return nil
}

// accessCounts returns each block's accesses over the whole trace.
func accessCounts(t *bench.Trace) []int64 {
	counts := make([]int64, t.Blocks())
	for i := range t.Requests() {
		ids, _ := t.Request(i)
		for _, id := range ids {
			counts[id]++
		}
	}
	return counts
}

func (s *replSim) request(i int) {
	n := i % len(s.nodes)
	node := &s.nodes[n]
	ids, _ := s.t.Request(i)
	hit := true
	for _, id := range ids {
		s.run.Blocks++
		if hit {
			server := n
			if !node.held[id] {
				server = -1
				for j := range s.nodes {
					if s.nodes[j].held[id] && (server < 0 || s.nodes[j].served < s.nodes[server].served) {
						server = j
					}
				}
			}
			if server >= 0 {
				s.run.HitBlocks++
				if server != n {
					s.run.RemoteHits++
					s.nodes[server].served++
				}
				s.use(server, id)
				s.nodes[server].lru.Access(id)
				node.hits = append(node.hits, bench.IDKey(id))
				continue
			}
			hit = false
		}
		s.store(n, id) // computed by the request
	}
}

// use records that node n used block id now, for its Free figure.
func (s *replSim) use(n int, id int32) {
	node := &s.nodes[n]
	s.forget(n, id)
	node.lastUse[id] = s.tick + 1
	node.recent[int(s.tick)%s.window]++
	node.recentSum++
}

// forget takes id's last use out of the window count.
func (s *replSim) forget(n int, id int32) {
	node := &s.nodes[n]
	if last := node.lastUse[id] - 1; last >= 0 && int(s.tick-last) < s.window {
		node.recent[int(last)%s.window]--
		node.recentSum--
	}
	node.lastUse[id] = 0
}

// store puts id on node n, evicting by LRU, and reports it.
func (s *replSim) store(n int, id int32) {
	node := &s.nodes[n]
	if node.held[id] {
		s.use(n, id)
		node.lru.Access(id)
		return
	}
	for node.used >= s.capacity {
		victim, ok := node.lru.Evict(nil)
		if !ok {
			break
		}
		s.unheld(n, victim)
	}
	node.held[id] = true
	node.used++
	s.series.counts[id]++
	node.lru.Add(id, policy.Info[int32]{Size: 1})
	s.use(n, id)
	k := bench.IDKey(id)
	s.apply(n, index.Change{Key: k, Added: true})
	if s.core != nil {
		s.step(replicate.Added{Node: uint32(n), Key: k, Size: 1})
	}
}

// unheld reports that node n no longer holds id (the LRU already forgot it).
func (s *replSim) unheld(n int, id int32) {
	node := &s.nodes[n]
	node.held[id] = false
	node.used--
	s.series.counts[id]--
	s.forget(n, id)
	k := bench.IDKey(id)
	s.apply(n, index.Change{Key: k})
	if s.core != nil {
		s.step(replicate.Removed{Node: uint32(n), Key: k})
	}
}

func (s *replSim) apply(n int, c index.Change) {
	if err := s.g.Apply(uint32(n), []index.Change{c}); err != nil {
		panic("BUG: bench: " + err.Error())
	}
}

func (s *replSim) step(ev replicate.Event) {
	if err := s.core.Step(s.now, ev); err != nil {
		panic("BUG: bench: " + err.Error())
	}
}

// doTick ends the current tick: nodes report, the core decides, its actions
// run.
func (s *replSim) doTick() {
	s.tick++
	s.now = replEpoch.Add(time.Duration(s.tick) * s.o.Tick)
	most, total := 0, 0
	for i := range s.nodes {
		node := &s.nodes[i]
		// The ring slot of this tick held the uses of one window ago.
		slot := int(s.tick) % s.window
		node.recentSum -= node.recent[slot]
		node.recent[slot] = 0
		most = max(most, node.served)
		total += node.served
	}
	if total > 0 {
		s.busiest += float64(most) / float64(total)
		s.fetchTick++
	}
	s.run.PeakFetches = max(s.run.PeakFetches, most)
	for i := range s.nodes {
		node := &s.nodes[i]
		if s.core != nil {
			if len(node.hits) > 0 {
				s.step(replicate.Hits{Node: uint32(i), Keys: node.hits})
			}
			load := 0.0
			if most > 0 {
				load = float64(node.served) / float64(most)
			}
			s.step(replicate.NodeUp{Node: uint32(i), Capacity: s.capacity, Free: s.capacity - node.recentSum, Load: load})
		}
		node.hits = node.hits[:0]
		node.served = 0
	}
	if s.core == nil {
		return
	}
	for _, a := range s.core.Tick(s.now) {
		id := bench.KeyID(a.Key)
		if a.Kind == replicate.Copy {
			s.store(int(a.Node), id)
		} else if s.nodes[a.Node].held[id] {
			s.nodes[a.Node].lru.Remove(id)
			s.unheld(int(a.Node), id)
		}
		s.step(replicate.Done{ID: a.ID})
	}
}

func (s *replSim) sample(at time.Duration) {
	smp := Sample{At: at}
	if s.core != nil {
		st := s.core.Stats()
		smp.Hot, smp.Copies, smp.Drops = st.Hot, st.Copies, st.Drops
	}
	s.run.Samples = append(s.run.Samples, smp)
	for id, n := range s.series.counts {
		s.series.cum[id] += int64(n)
	}
	s.series.snaps = append(s.series.snaps, slices.Clone(s.series.counts))
}

// Report turns the runs into rows: one summary row per run, with
// the run without replication as the baseline of the replicated one (ratio:
// the run's local share of hits over the baseline's), then one row per
// sample with the replica counts of the key at each rank (replicas_rankN)
// and the mean over the top N keys (mean_topN).
func Report(runs []Run, o Options) *bench.Report {
	o.EnsureDefaults()
	r := &bench.Report{Columns: []string{"name", "trace", "setup", "t_s"}}
	for _, rank := range o.Ranks {
		r.Columns = append(r.Columns, fmt.Sprintf("replicas_rank%d", rank))
	}
	for _, rank := range o.Ranks {
		r.Columns = append(r.Columns, fmt.Sprintf("mean_top%d", rank))
	}
	r.Columns = append(r.Columns, "hot_blocks", "copies", "drops", "hit_rate", "local_share", "peak_node_fetches",
		"busiest_share", "baseline", "baseline_local_share", "ratio")
	r.Human = bench.HumanColumns["replication"]
	base := map[string]float64{}
	for _, run := range runs {
		if run.Setup == SetupNoReplication {
			base[run.Trace] = run.LocalShare()
		}
	}
	for _, run := range runs {
		row := bench.Row{
			"name":              run.Trace + "/" + run.Setup,
			"trace":             run.Trace,
			"setup":             run.Setup,
			"nodes":             o.Nodes,
			"capacity_tokens":   o.NodeCapacity,
			"hit_rate":          run.HitRate(),
			"local_share":       run.LocalShare(),
			"copies":            run.Copies,
			"drops":             run.Drops,
			"peak_node_fetches": run.PeakFetches,
			"busiest_share":     run.BusiestShare,
		}
		if b, ok := base[run.Trace]; ok && run.Setup == SetupReplicate {
			row["baseline"] = SetupNoReplication
			row["baseline_local_share"] = b
			row["ratio"] = bench.RatioOrNaN(run.LocalShare(), b)
		}
		r.Add(row)
	}
	for _, run := range runs {
		for _, smp := range run.Samples {
			row := bench.Row{
				"name":       fmt.Sprintf("%s/%s/t=%ds", run.Trace, run.Setup, int(smp.At.Seconds())),
				"trace":      run.Trace,
				"setup":      run.Setup,
				"t_s":        int(smp.At.Seconds()),
				"hot_blocks": smp.Hot,
				"copies":     smp.Copies,
				"drops":      smp.Drops,
			}
			for i, rank := range o.Ranks {
				row[fmt.Sprintf("replicas_rank%d", rank)] = smp.Replicas[i]
				row[fmt.Sprintf("mean_top%d", rank)] = smp.MeanTop[i]
			}
			r.Add(row)
		}
	}
	return r
}

// ThinSamples keeps the summary rows and every n-th sample row of each run
// (a trace and setup), for a table a person reads.
func ThinSamples(r *bench.Report, n int) *bench.Report {
	return bench.ThinSamples(r, n, func(row bench.Row) any { return [2]any{row["trace"], row["setup"]} })
}
