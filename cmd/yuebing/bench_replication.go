package main

import (
	"time"

	"github.com/yuebing/yuebing/bench/replication"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench"
)

func newBenchReplicationCmd() *cobra.Command {
	var (
		traces      []string
		nodes       int
		capacity    string
		ranks       string
		rankBy      string
		sample      time.Duration
		hotHits     uint32
		maxReplicas int
		window      time.Duration
		asJSON      bool
		plot        string
		every       int
	)
	cmd := &cobra.Command{
		Use:   "replication",
		Short: "Simulate hot-block replication on request traces and report replica counts of the top keys",
		Long: `Replay Mooncake-format request traces over N simulated nodes (LRU caches of
C tokens each, requests dealt in turn, prefix hits served from any node) with
the replication core deciding copies and drops, and again without it. Every
--sample of trace time, record how many nodes hold each key, and report the
keys at --ranks: ranked, as in the paper's Figure 11, by their replica counts
summed over all samples (or, with --rank-by accesses, by accesses).

Summary rows (one per trace and setup) give the hit rate, local_share (the
share of hits the requesting node served itself), the core's copies and drops,
and the busiest node's fetches: peak_node_fetches is the most fetches one node
served in one tick, busiest_share the busiest node's share of each tick's
fetches. The replicated run has the unreplicated one as its baseline; ratio is
its local share over the baseline's. Sample rows follow, with replicas_rankN
(the key at rank N) and mean_topN (the mean over the top N keys); the table
shows every --every-th of them, --json all. See docs/cluster.md.`,
		Example: `  yuebing bench replication --trace traces/conversation_trace.jsonl,traces/synthetic_trace.jsonl
  yuebing bench replication --trace traces/conversation_trace.jsonl --hot-hits 4 --plot replication.png --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(traces) == 0 {
				return usageErrorf("--trace is required")
			}
			rf := replication.Flags{Options: replication.Options{Nodes: nodes, Sample: sample, RankBy: rankBy, Progress: true},
				Capacity: capacity, Ranks: ranks, Every: every}
			rf.Core.HotHits, rf.Core.MaxReplicas, rf.Core.Window = hotHits, maxReplicas, window
			o, err := rf.Parse()
			if err != nil {
				return usageError{err}
			}
			for _, path := range traces {
				t, err := bench.OpenTrace(path)
				if err != nil {
					return err
				}
				o.Traces = append(o.Traces, t)
			}
			runs, err := replication.Simulate(cmd.Context(), o)
			if err != nil {
				return err
			}
			if plot != "" {
				if err := replication.Plot(runs, o, plot); err != nil {
					return err
				}
			}
			r := replication.Report(runs, o)
			if !asJSON {
				r = replication.ThinSamples(r, every)
			}
			return r.Write(cmd.OutOrStdout(), asJSON)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&traces, "trace", nil, "trace files to replay, comma-separated or repeated (required)")
	f.IntVar(&nodes, "nodes", 10, "number of simulated nodes")
	f.StringVar(&capacity, "capacity", "3M", "cache per node, in tokens (K, M, G are powers of 1000)")
	f.StringVar(&ranks, "ranks", "10,100,1000", "ranks of the keys whose replica counts are reported")
	f.StringVar(&rankBy, "rank-by", replication.RankByReplicas, `order of the keys: "replicas" (summed over all samples, as the paper's Figure 11) or "accesses"`)
	f.DurationVar(&sample, "sample", 30*time.Second, "how often replica counts are sampled, in trace time")
	f.Uint32Var(&hotHits, "hot-hits", 0, "hits per window for a second replica (0: the core's default, 32)")
	f.IntVar(&maxReplicas, "max-replicas", 0, "most replicas heat may ask for (0: the core's default, 8)")
	f.DurationVar(&window, "window", 0, "heat window (0: the core's default, 60s)")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"results":[...]} instead of a table`)
	f.StringVar(&plot, "plot", "", "also draw replica counts over time, one panel per trace, to this PNG file")
	f.IntVar(&every, "every", 10, "table only: show every n-th sample row (the summary rows always)")
	return cmd
}
