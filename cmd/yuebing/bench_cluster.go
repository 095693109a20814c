package main

import (
	"fmt"
	"os"
	"time"

	"github.com/yuebing/yuebing/bench/cluster"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench"
)

func newBenchClusterCmd() *cobra.Command {
	var (
		trace, dram, blockBytes, getSize string
		nodes, requests, samples         int
		hotHits, maxReplicas, workers    int
		ranks                            string
		window, getDuration              time.Duration
		slack                            float64
		routing                          string
		asJSON, inProcess                bool
		every                            int
	)
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Replay a trace against a local cluster of real nodes; hit rate, replica counts, cross-node GETs",
		Long: `Start N nodes in this process (each with its own HTTP and transfer listeners, a
small DRAM tier and a token SSD tier) and an embedded etcd, and replay a
Mooncake-format trace through the real HTTP API. Each request goes to the node
holding the longest prefix of its blocks by the cluster's prefix query, unless
it is already --slack over its fair share of requests (then the next best); that node serves the prefix it holds, and the rest of
the request's blocks are stored there, as a prefill would.

The trace is replayed twice on fresh clusters: "local" counts only the blocks
the serving node holds itself, "cluster" also reads blocks held by other nodes
(through the node, over the transfer service) and lets the leader replicate hot
blocks. Rows: the hit rate of each (cluster with local as baseline); GET
throughput of 1 MiB blocks from the node holding them and from another node
(remote with local as baseline, on a two-node cluster that does not keep what
it fetches), a 64-block prefix read the same two ways, and put latency on a
node of that cluster and on a node alone; and, every 1/--samples of the replay, the mean replica count of
the top 10/100/1000 keys by accesses (the paper's Figure 11). The table shows
every --every-th sample row, --json all. See docs/cluster.md.

The GET and put measurements run on nodes started from this binary as
processes of their own, as in a deployment (--in-process: in this process,
as the replays).`,
		Example: `  yuebing bench cluster --trace traces/conversation_trace.jsonl --requests 3000
  yuebing bench cluster --trace traces/synthetic_trace.jsonl --nodes 4 --hot-hits 8 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if trace == "" {
				return usageErrorf("--trace is required")
			}
			cf := cluster.Flags{
				Options: cluster.Options{Nodes: nodes, Requests: requests, Samples: samples, HotHits: hotHits,
					MaxReplicas: maxReplicas, Window: window, Slack: slack, Routing: routing, GetDuration: getDuration, GetWorkers: workers, Progress: true},
				DRAMCapacity: dram, BlockBytes: blockBytes, GetSize: getSize, Ranks: ranks, Every: every,
			}
			o, err := cf.Parse()
			if err != nil {
				return usageError{err}
			}
			t, err := bench.OpenTrace(trace)
			if err != nil {
				return err
			}
			o.Trace = t
			if !inProcess {
				if o.Binary, err = os.Executable(); err != nil {
					return fmt.Errorf("cluster: finding this binary: %w", err)
				}
			}
			res, err := cluster.Simulate(cmd.Context(), o)
			if err != nil {
				return err
			}
			r := cluster.Report(res, o)
			if !asJSON {
				r = cluster.ThinSamples(r, every)
			}
			return r.Write(cmd.OutOrStdout(), asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&trace, "trace", "", "trace file to replay (required)")
	f.IntVar(&nodes, "nodes", 3, "number of nodes")
	f.StringVar(&dram, "dram-capacity", "96MiB", "DRAM tier of each node (96MiB: 3M tokens of 512-token blocks at 16KiB)")
	f.StringVar(&routing, "routing", cluster.RoutePrefix, `"prefix" (cache-aware, by the cluster's prefix query) or "round-robin"`)
	f.Float64Var(&slack, "slack", 0.1, "how far over its fair share of requests a node may go before routing passes it over (0.1: 10%)")
	f.StringVar(&blockBytes, "block-bytes", "16KiB", "bytes stored per trace block")
	f.IntVar(&requests, "requests", 0, "replay at most this many requests (0: all)")
	f.IntVar(&samples, "samples", 20, "replica-count samples over the replay")
	f.StringVar(&ranks, "ranks", "10,100,1000", "top-N sets whose mean replica counts are reported")
	f.IntVar(&hotHits, "hot-hits", 0, "hits per heat window for a second replica (0: the default, 32)")
	f.IntVar(&maxReplicas, "max-replicas", 0, "most replicas heat may ask for (0: the default, 8)")
	f.DurationVar(&window, "window", 0, "heat window (0: the default, 60s)")
	f.StringVar(&getSize, "get-size", "1MiB", "block size of the cross-node GET measurement")
	f.DurationVar(&getDuration, "get-duration", 3*time.Second, "how long each GET measurement runs")
	f.IntVar(&workers, "get-workers", 4, "concurrent GETs")
	f.BoolVar(&inProcess, "in-process", false, "run the GET and put measurements on nodes in this process rather than node processes")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"results":[...]} instead of a table`)
	f.IntVar(&every, "every", 4, "table only: show every n-th replica sample row")
	return cmd
}
