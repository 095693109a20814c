package main

import (
	"github.com/spf13/cobra"
	"github.com/yuebing/yuebing/bench/pool"

	"github.com/yuebing/yuebing/bench"
)

func newBenchPoolCmd() *cobra.Command {
	var (
		traces   []string
		nodes    int
		capacity string
		pol      string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Compare a global KV-cache pool with per-node local caches on request traces",
		Long: `Replay Mooncake-format request traces through N nodes of C tokens each:
as local caches, with requests routed round-robin or to the node holding the
longest cached prefix, and as one global pool of N x C tokens with hits across
nodes (what a yuebing cluster provides). Reports hit rate and prefill compute
saved; the best-prefix local setup is the baseline. The defaults are the
paper's setup: 10 nodes of 3M tokens.`,
		Example: `  yuebing bench pool --trace traces/conversation_trace.jsonl,traces/synthetic_trace.jsonl`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(traces) == 0 {
				return usageErrorf("--trace is required")
			}
			opts, err := pool.Flags{Nodes: nodes, Capacity: capacity, Policy: pol}.Options()
			if err != nil {
				return usageError{err}
			}
			opts.Progress = true
			for _, path := range traces {
				t, err := bench.OpenTrace(path)
				if err != nil {
					return err
				}
				opts.Traces = append(opts.Traces, t)
			}
			cells, err := pool.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return pool.Report(cells, opts).Write(cmd.OutOrStdout(), asJSON)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&traces, "trace", nil, "trace files to replay, comma-separated or repeated (required)")
	f.IntVar(&nodes, "nodes", 10, "number of nodes")
	f.StringVar(&capacity, "capacity", "3M", "cache per node, in tokens (K, M, G are powers of 1000)")
	f.StringVar(&pol, "policy", "lru", "eviction policy of every cache")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"results":[...]} instead of a table`)
	return cmd
}
