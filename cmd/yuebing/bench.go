package main

import "github.com/spf13/cobra"

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure yuebing: store, transfer, HTTP, Redis front end, trace replay, scheduling, replication, cluster, Python client, end to end, router",
		Long: `Benchmarks print a human table, or with --json exactly one JSON object on stdout:
{"results":[{"name":...}, ...]}. Rows with a same-run baseline carry baseline,
baseline_gbps (or the matching unit) and ratio. Progress goes to stderr.`,
	}
	cmd.AddCommand(newBenchStoreCmd(), newBenchHitrateCmd(), newBenchPoolCmd(), newBenchTransferCmd(), newBenchSchedCmd(), newBenchHTTPCmd(), newBenchRespCmd(), newBenchReplicationCmd(), newBenchClusterCmd(), newBenchPythonCmd(), newBenchE2ECmd(), newBenchRouterCmd(), newBenchSoakCmd())
	return cmd
}
