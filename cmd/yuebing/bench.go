package main

import (
	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure yuebing: store, transfer, HTTP, Redis front end, trace replay, scheduling, replication, cluster, Python client, end to end, router",
		Long: `Benchmarks print a human table, or with --json exactly one JSON object on stdout:
{"results":[{"name":...}, ...]}. Rows with a same-run baseline carry baseline,
baseline_gbps (or the matching unit) and ratio. The table shows the figures
that answer each bench; --json has every field. Progress bars go to stderr,
only when it is a terminal unless --progress.`,
	}
	var progress bool
	cmd.PersistentFlags().BoolVar(&progress, "progress", false, "draw progress bars on stderr even when it is not a terminal")
	cmd.PersistentPreRun = func(*cobra.Command, []string) { bench.ShowProgress(progress) }
	cmd.AddCommand(newBenchStoreCmd(), newBenchHitrateCmd(), newBenchPoolCmd(), newBenchTransferCmd(), newBenchSchedCmd(), newBenchHTTPCmd(), newBenchRespCmd(), newBenchReplicationCmd(), newBenchClusterCmd(), newBenchPythonCmd(), newBenchE2ECmd(), newBenchRouterCmd(), newBenchSoakCmd())
	return cmd
}
