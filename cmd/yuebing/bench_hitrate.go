package main

import (
	"strings"

	"github.com/yuebing/yuebing/bench/hitrate"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench"
)

func newBenchHitrateCmd() *cobra.Command {
	var (
		throughTier bool
		traces      []string
		capacities  string
		policies    string
		asJSON      bool
		plot        string
		workers     int
		ssdCap      string
		s3Cap       string
		admissions  string
	)
	cmd := &cobra.Command{
		Use:   "hitrate",
		Short: "Replay request traces through eviction policies and report prefix hit rates",
		Long: `Replay Mooncake-format request traces (JSONL: timestamp, input_length,
output_length, hash_ids of 512-token blocks) through a simulated cache of each
capacity and policy, and report the prefix hit rate and the prefill compute it
saves (the paper's FLOPs model for LLaMA3-70B).

A request hits its leading cached blocks, up to the first miss; then all of its
blocks are inserted or touched, first to last. Beside the policies, every run
reports two bounds: "unbounded" (infinite space, capacity_tokens 0) and
"belady" (Belady's offline MIN at each capacity). Policy rows carry LRU at the
same capacity as their baseline. See docs/policies.md.`,
		Example: `  yuebing bench hitrate --trace traces/conversation_trace.jsonl --capacity 1M,3M,10M,50M
  yuebing bench hitrate --trace a.jsonl,b.jsonl --policy lru,s3fifo --json --plot hitrate.png`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(traces) == 0 {
				return usageErrorf("--trace is required")
			}
			opts, err := hitrate.Flags{Capacities: capacities, SSDCapacity: ssdCap, S3Capacity: s3Cap,
				Admissions: admissions, Policies: policies, Workers: workers, ThroughTier: throughTier}.Options()
			if err != nil {
				return usageError{err}
			}
			for _, path := range traces {
				t, err := bench.OpenTrace(path)
				if err != nil {
					return err
				}
				opts.Traces = append(opts.Traces, t)
			}
			cells, err := hitrate.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if plot != "" {
				if err := hitrate.Plot(cells, plot); err != nil {
					return err
				}
			}
			return hitrate.Report(cells).Write(cmd.OutOrStdout(), asJSON)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&traces, "trace", nil, "trace files to replay, comma-separated or repeated (required)")
	f.StringVar(&capacities, "capacity", "1M,3M,10M,50M", "cache sizes in tokens (K, M, G are powers of 1000); inf is the unbounded cache, always reported")
	f.StringVar(&policies, "policy", strings.Join(hitrate.PolicyNames, ","), "eviction policies to compare")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"results":[...]} instead of a table`)
	f.StringVar(&plot, "plot", "", "also draw hit rate against capacity, one panel per trace, to this PNG file")
	f.StringVar(&ssdCap, "ssd-capacity", "", "add an SSD of this many tokens below each capacity's DRAM (LRU both) and one row per SSD admission policy, with ssd_write_bytes and ssd_hit_bytes")
	f.StringVar(&s3Cap, "s3-capacity", "", "with --ssd-capacity: add an S3 tier of this many tokens below the SSD, taking every block SSD evicts, and report s3_hit_bytes")
	f.StringVar(&admissions, "ssd-admission", strings.Join(hitrate.Admissions, ","), "SSD admission policies compared with --ssd-capacity, of "+strings.Join(hitrate.Admissions, ", ")+": all writes every DRAM eviction, oracle reads the trace ahead (a bound, not a policy); see docs/policies.md")
	f.IntVar(&workers, "workers", 0, "simulations run at once (default: GOMAXPROCS)")
	f.BoolVar(&throughTier, "through-tier", false, "also replay every policy through a real DRAM tier (64-byte values) and report tier_hit_rate")
	return cmd
}
