package hitrate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/tier/policy"
)

// The two bounds a hit-rate sweep reports beside the policies.
const (
	// PolicyUnbounded is a cache with infinite space: the most any cache
	// can hit on a trace.
	PolicyUnbounded = "unbounded"
	// PolicyBelady is Belady's offline MIN for the given space.
	PolicyBelady = "belady"
)

// DefaultCapacities are the cache sizes, in tokens, of the paper's
// Figure 9 discussion: 3M is one node's DRAM, 50M about the pool of 20.
var DefaultCapacities = []int64{1_000_000, 3_000_000, 10_000_000, 50_000_000}

// Options configures a hit-rate sweep.
type Options struct {
	// Traces to replay. Required.
	Traces []*bench.Trace
	// Capacities are cache sizes in tokens, each at least one block of
	// TraceBlockTokens; a size is rounded down to whole blocks.
	// Default: DefaultCapacities.
	Capacities []int64
	// Policies are eviction policies from package policy, run at every
	// capacity. Default: policy.Names.
	Policies []string
	// Workers bounds the simulations run at once. Default: GOMAXPROCS.
	Workers int
	// Progress draws a progress bar on stderr. Default: off.
	Progress bool
	// ThroughTier also replays every policy cell through a real DRAM tier
	// (64-byte values; see TierCache) and reports its hit rate beside the
	// simulator's. Default: off.
	ThroughTier bool
	// SSDCapacity, in tokens, adds an SSD below each capacity's DRAM (LRU
	// both) and one row per SSD admission policy. Default 0: none.
	SSDCapacity int64
	// Admissions are the SSD admission policies run when SSDCapacity is
	// set. Default: Admissions.
	Admissions []string
	// S3Capacity, in tokens, adds an object tier (LRU) below the SSD that
	// takes every block SSD evicts. Default 0: none.
	S3Capacity int64
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Capacities == nil {
		o.Capacities = DefaultCapacities
	}
	if o.Policies == nil {
		o.Policies = policy.Names
	}
	if o.Admissions == nil {
		o.Admissions = Admissions
	}
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	if len(o.Traces) == 0 {
		errs = append(errs, fmt.Errorf("%w: no trace", bench.ErrOptions))
	}
	for _, c := range o.Capacities {
		if c < bench.TraceBlockTokens {
			errs = append(errs, fmt.Errorf("%w: capacity %d tokens is less than one %d-token block", bench.ErrOptions, c, bench.TraceBlockTokens))
		}
	}
	for _, a := range o.Admissions {
		if !slices.Contains(Admissions, a) {
			errs = append(errs, fmt.Errorf("%w: unknown SSD admission %q: want one of %v", bench.ErrOptions, a, Admissions))
		}
	}
	if o.S3Capacity < 0 || o.S3Capacity > 0 && (o.SSDCapacity == 0 || o.S3Capacity < bench.TraceBlockTokens) {
		errs = append(errs, fmt.Errorf("%w: S3 capacity %d tokens: want 0, or at least one %d-token block under an SSD", bench.ErrOptions, o.S3Capacity, bench.TraceBlockTokens))
	}
	if o.SSDCapacity < 0 || o.SSDCapacity > 0 && o.SSDCapacity < bench.TraceBlockTokens {
		errs = append(errs, fmt.Errorf("%w: SSD capacity %d tokens: want 0 or at least one %d-token block", bench.ErrOptions, o.SSDCapacity, bench.TraceBlockTokens))
	}
	for _, p := range o.Policies {
		if !slices.Contains(policy.Names, p) {
			errs = append(errs, fmt.Errorf("%w: unknown policy %q", bench.ErrOptions, p))
		}
	}
	return errors.Join(errs...)
}

// Cell is one simulation of a sweep: a trace replayed through one
// policy at one capacity.
type Cell struct {
	Trace  string
	Policy string // a policy name, PolicyUnbounded or PolicyBelady
	// CapacityTokens is the cache size; 0 for PolicyUnbounded.
	CapacityTokens int64
	bench.ReplayResult
	// PresentHits, for PolicyBelady, counts accesses to cached blocks in or
	// out of a request's leading prefix; see beladyCache.
	PresentHits int64
	// Tier is the replay through a real DRAM tier, when asked for.
	Tier *bench.ReplayResult
	// Admission, for PolicySSD cells, is the SSD admission policy, and
	// SSDCapacityTokens the SSD's size; SSDWrites and SSDHits count
	// blocks written to SSD and prefix blocks read from it.
	Admission          string
	SSDCapacityTokens  int64
	SSDWrites, SSDHits int64
	// S3CapacityTokens, when set, is the object tier under the SSD;
	// S3Hits counts prefix blocks read from it.
	S3CapacityTokens int64
	S3Hits           int64
}

// PolicySSD names the cells of LRU DRAM over LRU SSD.
const PolicySSD = "lru+ssd"

// Hitrate replays every trace through the unbounded cache once, and through
// Belady's MIN and every policy at every capacity. Cells come back grouped by
// trace, then capacity (unbounded first), bounds before policies.
func Run(ctx context.Context, o Options) ([]Cell, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var cells []Cell
	traces := map[string]*bench.Trace{}
	for _, t := range o.Traces {
		traces[t.Name] = t
		cells = append(cells, Cell{Trace: t.Name, Policy: PolicyUnbounded})
		for _, c := range o.Capacities {
			cells = append(cells, Cell{Trace: t.Name, Policy: PolicyBelady, CapacityTokens: c})
			for _, p := range o.Policies {
				cells = append(cells, Cell{Trace: t.Name, Policy: p, CapacityTokens: c})
			}
			if o.SSDCapacity > 0 {
				for _, a := range o.Admissions {
					cells = append(cells, Cell{Trace: t.Name, Policy: PolicySSD, CapacityTokens: c, Admission: a, SSDCapacityTokens: o.SSDCapacity, S3CapacityTokens: o.S3Capacity})
				}
			}
		}
	}
	if len(traces) != len(o.Traces) {
		return nil, fmt.Errorf("%w: two traces are both named %q", bench.ErrOptions, duplicateName(o.Traces))
	}
	var bar *bench.Progress
	if o.Progress {
		bar = bench.NewProgress("hitrate", int64(len(cells)))
		defer bar.Done()
	}
	err := bench.RunCells(ctx, len(cells), o.Workers, func(i int) error {
		c := &cells[i]
		err := c.run(ctx, traces[c.Trace], o.ThroughTier)
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

func (c *Cell) run(ctx context.Context, t *bench.Trace, throughTier bool) error {
	blocks := c.CapacityTokens / bench.TraceBlockTokens
	switch c.Policy {
	case PolicyUnbounded:
		c.ReplayResult = bench.Replay(t, bench.NewUnboundedCache(t.Blocks()))
	case PolicyBelady:
		b, err := newBeladyCache(t, blocks)
		if err != nil {
			return err
		}
		c.ReplayResult = bench.Replay(t, b)
		c.PresentHits = b.PresentHits
	case PolicySSD:
		tc, err := NewTwoTierCache(c.Admission, blocks, c.SSDCapacityTokens/bench.TraceBlockTokens)
		if err != nil {
			return err
		}
		if c.Admission == AdmitOracle {
			tc.WithTrace(t)
		}
		if c.S3CapacityTokens > 0 {
			tc.WithObjectTier(c.S3CapacityTokens / bench.TraceBlockTokens)
		}
		c.ReplayResult = bench.Replay(t, tc)
		c.SSDWrites, c.SSDHits, c.S3Hits = tc.SSDWrites, tc.SSDHits, tc.ObjHits
	default:
		pc, err := bench.NewPolicyCache(c.Policy, blocks, t.Blocks())
		if err != nil {
			return err
		}
		c.ReplayResult = bench.Replay(t, pc)
		if throughTier {
			res, err := ReplayThroughTier(ctx, t, c.Policy, blocks)
			if err != nil {
				return err
			}
			c.Tier = &res
		}
	}
	return nil
}

func duplicateName(ts []*bench.Trace) string {
	seen := map[string]bool{}
	for _, t := range ts {
		if seen[t.Name] {
			return t.Name
		}
		seen[t.Name] = true
	}
	return ""
}

// Report turns a sweep into report rows. Every row has name, trace,
// policy, capacity_tokens, hit_rate and compute_saved. Policy rows also carry
// LRU at the same capacity as their baseline (baseline, baseline_hit_rate,
// ratio), gap_closed, the share of the LRU-to-Belady gap they close, and
// of_unbounded, their hit rate over the unbounded one. Belady rows carry
// present_hit_rate, the rate MIN bounds strictly (see beladyCache).
func Report(cells []Cell) *bench.Report {
	r := &bench.Report{Columns: []string{"name", "trace", "policy", "capacity_tokens", "hit_rate", "compute_saved",
		"baseline", "baseline_hit_rate", "ratio", "gap_closed", "of_unbounded", "present_hit_rate", "tier_hit_rate",
		"admission", "ssd_capacity_tokens", "ssd_write_bytes", "ssd_hit_bytes", "ssd_write_ratio", "s3_capacity_tokens", "s3_hit_bytes"}}
	r.Human = bench.HumanColumns["hitrate"]
	type at struct {
		trace  string
		policy string
		cap    int64
	}
	hit := map[at]float64{}
	ssdAll := map[at]Cell{}
	for _, c := range cells {
		if c.Policy == PolicySSD {
			if c.Admission == AdmitAll {
				ssdAll[at{c.Trace, c.Policy, c.CapacityTokens}] = c
			}
			continue
		}
		hit[at{c.Trace, c.Policy, c.CapacityTokens}] = c.HitRate()
	}
	for _, c := range cells {
		row := bench.Row{
			"trace":           c.Trace,
			"policy":          c.Policy,
			"capacity_tokens": c.CapacityTokens,
			"hit_rate":        c.HitRate(),
			"compute_saved":   c.ComputeSaved(),
		}
		switch c.Policy {
		case PolicyUnbounded:
			row["name"] = c.Trace + "/" + c.Policy
		case PolicySSD:
			row["name"] = fmt.Sprintf("%s/%s:%s/%d+%d", c.Trace, c.Policy, c.Admission, c.CapacityTokens, c.SSDCapacityTokens)
			if c.S3CapacityTokens > 0 {
				row["name"] = fmt.Sprintf("%s/%s+s3:%s/%d+%d+%d", c.Trace, c.Policy, c.Admission, c.CapacityTokens, c.SSDCapacityTokens, c.S3CapacityTokens)
				row["s3_capacity_tokens"] = c.S3CapacityTokens
				row["s3_hit_bytes"] = c.S3Hits * BlockBytes
			}
			row["admission"] = c.Admission
			row["ssd_capacity_tokens"] = c.SSDCapacityTokens
			row["ssd_write_bytes"] = c.SSDWrites * BlockBytes
			row["ssd_hit_bytes"] = c.SSDHits * BlockBytes
			if all, ok := ssdAll[at{c.Trace, c.Policy, c.CapacityTokens}]; ok {
				row["baseline"] = PolicySSD + ":" + AdmitAll
				row["baseline_hit_rate"] = all.HitRate()
				row["ratio"] = bench.RatioOrNaN(c.HitRate(), all.HitRate())
				row["ssd_write_ratio"] = bench.RatioOrNaN(float64(c.SSDWrites), float64(all.SSDWrites))
			}
		case PolicyBelady:
			row["name"] = fmt.Sprintf("%s/%s/%d", c.Trace, c.Policy, c.CapacityTokens)
			row["present_hit_rate"] = bench.Ratio(float64(c.PresentHits), float64(c.Blocks))
		default:
			row["name"] = fmt.Sprintf("%s/%s/%d", c.Trace, c.Policy, c.CapacityTokens)
			if lru, ok := hit[at{c.Trace, "lru", c.CapacityTokens}]; ok {
				row["baseline"] = "lru"
				row["baseline_hit_rate"] = lru
				row["ratio"] = bench.RatioOrNaN(c.HitRate(), lru)
				if opt, ok := hit[at{c.Trace, PolicyBelady, c.CapacityTokens}]; ok {
					row["gap_closed"] = bench.RatioOrNaN(c.HitRate()-lru, opt-lru)
				}
			}
		}
		if c.Policy != PolicyUnbounded {
			if u, ok := hit[at{c.Trace, PolicyUnbounded, 0}]; ok {
				row["of_unbounded"] = bench.RatioOrNaN(c.HitRate(), u)
			}
		}
		if c.Tier != nil {
			row["tier_hit_rate"] = c.Tier.HitRate()
		}
		r.Add(row)
	}
	return r
}
