package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/tier/policy"
)

// Pool setups compared by Pool.
const (
	// SetupRoundRobin: local caches, requests dealt to nodes in turn.
	SetupRoundRobin = "local-round-robin"
	// SetupBestPrefix: local caches, each request sent to the node that
	// holds its longest cached prefix (the paper's cache-aware scheduler),
	// the least loaded among equals. A node already 10% over its fair
	// share of requests is passed over: without a bound every request
	// would follow the shared system prompt to one node, which a real
	// scheduler's queueing estimate prevents.
	SetupBestPrefix = "local-best-prefix"
	// SetupGlobal: one pool of all nodes' memory with hits across nodes,
	// what a yuebing cluster provides.
	SetupGlobal = "global"
)

// Options configures the global-pool-versus-local-caches comparison.
// The defaults are the paper's setup (section 5.3.2).
type Options struct {
	// Traces to replay. Required.
	Traces []*bench.Trace
	// Nodes is the number of nodes. Default: 10.
	Nodes int
	// NodeCapacity is each node's cache, in tokens. Default: 3M.
	NodeCapacity int64
	// Policy evicts in every cache. Default: "lru".
	Policy string
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
	if o.Policy == "" {
		o.Policy = "lru"
	}
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	if len(o.Traces) == 0 {
		errs = append(errs, fmt.Errorf("%w: no trace", bench.ErrOptions))
	}
	if o.Nodes < 1 {
		errs = append(errs, fmt.Errorf("%w: %d nodes", bench.ErrOptions, o.Nodes))
	}
	if o.NodeCapacity < bench.TraceBlockTokens {
		errs = append(errs, fmt.Errorf("%w: node capacity %d tokens is less than one %d-token block", bench.ErrOptions, o.NodeCapacity, bench.TraceBlockTokens))
	}
	if !slices.Contains(policy.Names, o.Policy) {
		errs = append(errs, fmt.Errorf("%w: unknown policy %q", bench.ErrOptions, o.Policy))
	}
	return errors.Join(errs...)
}

// Cell is one trace replayed in one setup.
type Cell struct {
	Trace, Setup string
	bench.ReplayResult
}

// Pool replays each trace through local caches (round-robin and
// best-prefix routing) and through one global pool of the same total size.
func Run(ctx context.Context, o Options) ([]Cell, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var cells []Cell
	for _, t := range o.Traces {
		for _, s := range []string{SetupRoundRobin, SetupBestPrefix, SetupGlobal} {
			cells = append(cells, Cell{Trace: t.Name, Setup: s})
		}
	}
	var bar *bench.Progress
	if o.Progress {
		bar = bench.NewProgress("pool", int64(len(cells)))
		defer bar.Done()
	}
	err := bench.RunCells(ctx, len(cells), o.Workers, func(i int) error {
		c := &cells[i]
		res, err := replayPool(o.Traces[i/3], c.Setup, o)
		c.ReplayResult = res
		if bar != nil {
			bar.Add(1)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return cells, nil
}

// bestPrefixSlack is how far over its fair share of requests a node may go
// before best-prefix routing passes it over.
const bestPrefixSlack = 0.1

func replayPool(t *bench.Trace, setup string, o Options) (bench.ReplayResult, error) {
	blocks := o.NodeCapacity / bench.TraceBlockTokens
	if setup == SetupGlobal {
		c, err := bench.NewPolicyCache(o.Policy, blocks*int64(o.Nodes), t.Blocks())
		if err != nil {
			return bench.ReplayResult{}, err
		}
		return bench.Replay(t, c), nil
	}
	nodes := make([]*bench.PolicyCache, o.Nodes)
	for i := range nodes {
		c, err := bench.NewPolicyCache(o.Policy, blocks, t.Blocks())
		if err != nil {
			return bench.ReplayResult{}, err
		}
		nodes[i] = c
	}
	load := make([]int, o.Nodes) // requests routed to each node
	var res bench.ReplayResult
	for i := range t.Requests() {
		ids, n := t.Request(i)
		node := i % o.Nodes
		if setup == SetupBestPrefix {
			fair := float64(i)/float64(o.Nodes)*(1+bestPrefixSlack) + 1
			best := -1
			for j, c := range nodes {
				if float64(load[j]) > fair {
					continue
				}
				h := bench.PrefixHits(ids, c)
				if h > best || (h == best && load[j] < load[node]) {
					best, node = h, j
				}
			}
		}
		load[node]++
		res.Add(n, len(ids), bench.ReplayRequest(ids, nodes[node]))
	}
	return res, nil
}

// Report turns the comparison into rows: name, trace, setup, nodes,
// capacity_tokens (per node), policy, hit_rate and compute_saved, with the
// best-prefix local setup as the baseline of the others (ratio is their hit
// rate over its).
func Report(cells []Cell, o Options) *bench.Report {
	o.EnsureDefaults()
	r := &bench.Report{Columns: []string{"name", "trace", "setup", "nodes", "capacity_tokens", "policy", "hit_rate", "compute_saved", "baseline", "baseline_hit_rate", "ratio"}}
	r.Human = bench.HumanColumns["pool"]
	local := map[string]float64{}
	for _, c := range cells {
		if c.Setup == SetupBestPrefix {
			local[c.Trace] = c.HitRate()
		}
	}
	for _, c := range cells {
		row := bench.Row{
			"name":            fmt.Sprintf("%s/%s", c.Trace, c.Setup),
			"trace":           c.Trace,
			"setup":           c.Setup,
			"nodes":           o.Nodes,
			"capacity_tokens": o.NodeCapacity,
			"policy":          o.Policy,
			"hit_rate":        c.HitRate(),
			"compute_saved":   c.ComputeSaved(),
		}
		if base, ok := local[c.Trace]; ok && c.Setup != SetupBestPrefix {
			row["baseline"] = SetupBestPrefix
			row["baseline_hit_rate"] = base
			row["ratio"] = bench.RatioOrNaN(c.HitRate(), base)
		}
		r.Add(row)
	}
	return r
}
