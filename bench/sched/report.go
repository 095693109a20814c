package sched

import (
	"context"
	"fmt"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/scheduler"
)

// Experiments of the default scheduling suite.
const (
	// ExperimentSchedule compares prefill placement policies at the
	// trace's pace with no rejection (the paper's Figure 5).
	ExperimentSchedule = "schedule"
	// ExperimentOverload compares overload policies with the trace
	// replayed fast enough to overload the cluster.
	ExperimentOverload = "overload"
)

// Cell is one run of a suite.
type Cell struct {
	Experiment string
	Options    Options
	Result     *Result
}

// The overload experiment's cluster and pace. Both pools must saturate
// together for the decode load to lag the prefill queue: with P/D 8:8 the
// conversation trace saturates the prefill pool well before the decode
// pool, early rejection then only ever rejects for TTFT, and there is no
// decode load to mispredict. 10:6 at 5x loads both (docs/benchmarks.md).
const (
	DefaultOverloadSpeed   = 5
	DefaultOverloadPrefill = 10
	DefaultOverloadDecode  = 6
)

// Suite returns the default runs: every policy without rejection at
// base's speed, then cache-global with none, early and predicted rejection
// on overload's cluster at overload's speed (the rest of the options from
// base).
func Suite(base Options, overload Options) []Cell {
	var cells []Cell
	for _, p := range []scheduler.Policy{scheduler.PolicyRandom, scheduler.PolicyLoad, scheduler.PolicyCacheLocal, scheduler.PolicyCacheGlobal} {
		o := base
		o.Policy, o.Rejection = p, scheduler.RejectNone
		cells = append(cells, Cell{Experiment: ExperimentSchedule, Options: o})
	}
	for _, r := range []scheduler.Rejection{scheduler.RejectNone, scheduler.RejectEarly, scheduler.RejectPredicted} {
		o := base
		o.Policy, o.Rejection = scheduler.PolicyCacheGlobal, r
		o.Speed, o.Prefill, o.Decode = overload.Speed, overload.Prefill, overload.Decode
		cells = append(cells, Cell{Experiment: ExperimentOverload, Options: o})
	}
	return cells
}

// Run runs the cells, in parallel on up to workers goroutines
// (GOMAXPROCS when 0), filling in their results.
func Run(ctx context.Context, cells []Cell, workers int, progress bool) error {
	var bar *bench.Progress
	if progress {
		bar = bench.NewProgress("sched", int64(len(cells)))
		defer bar.Done()
	}
	for i := range cells {
		cells[i].Options.EnsureDefaults() // the report shows what ran
	}
	return bench.RunCells(ctx, len(cells), workers, func(i int) error {
		res, err := Simulate(ctx, cells[i].Options)
		if err != nil {
			return err
		}
		cells[i].Result = res
		if bar != nil {
			bar.Add(1)
		}
		return nil
	})
}

// Report turns runs into rows with the fields of docs/benchmarks.md:
// name, experiment, policy, rejection, speed, avg_ttft_s, p90_ttft_s,
// p90_tbt_ms, effective_capacity, hit_rate, rejected, prefill_load_std,
// decode_load_std, and in the schedule experiment the local cache-aware
// policy as baseline (ratio: its average TTFT over the row's, higher is
// better).
func Report(cells []Cell) *bench.Report {
	r := &bench.Report{Columns: []string{"name", "experiment", "policy", "rejection", "speed", "prefill", "decode", "avg_ttft_s", "p90_ttft_s", "p90_tbt_ms",
		"effective_capacity", "hit_rate", "rejected", "prefill_load_std", "decode_load_std", "baseline", "baseline_avg_ttft_s", "ratio"}}
	r.Human = bench.HumanColumns["sched"]
	var localTTFT float64
	hasLocal := false
	for _, c := range cells {
		if c.Experiment == ExperimentSchedule && c.Options.Policy == scheduler.PolicyCacheLocal && c.Result != nil {
			localTTFT, hasLocal = bench.Mean(c.Result.TTFTs), true
		}
	}
	for _, c := range cells {
		res := c.Result
		if res == nil {
			continue
		}
		name := fmt.Sprintf("%s/%s", c.Options.Policy, c.Options.Rejection)
		if c.Experiment == ExperimentOverload {
			name = "overload/" + name
		}
		ps, ds := res.LoadStd()
		ttfts := append([]float64(nil), res.TTFTs...)
		tbts := append([]float64(nil), res.TBTs...)
		avg := bench.Mean(ttfts)
		row := bench.Row{
			"name":               name,
			"experiment":         c.Experiment,
			"policy":             c.Options.Policy.String(),
			"rejection":          c.Options.Rejection.String(),
			"speed":              c.Options.Speed,
			"prefill":            c.Options.Prefill,
			"decode":             c.Options.Decode,
			"avg_ttft_s":         avg,
			"p90_ttft_s":         bench.Quantile(ttfts, 0.9),
			"p90_tbt_ms":         bench.Quantile(tbts, 0.9) * 1000,
			"effective_capacity": res.EffectiveCapacity(),
			"hit_rate":           res.HitRate(),
			"rejected":           res.RejectedShare(),
			"prefill_load_std":   ps,
			"decode_load_std":    ds,
		}
		if hasLocal && c.Experiment == ExperimentSchedule && c.Options.Policy != scheduler.PolicyCacheLocal {
			row["baseline"] = scheduler.PolicyCacheLocal.String()
			row["baseline_avg_ttft_s"] = localTTFT
			row["ratio"] = bench.RatioOrNaN(localTTFT, avg)
		}
		r.Add(row)
	}
	return r
}
