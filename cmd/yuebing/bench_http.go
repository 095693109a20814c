package main

import (
	"github.com/yuebing/yuebing/bench/http"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench"
)

func newBenchHTTPCmd() *cobra.Command {
	var (
		hf     http.Flags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "http",
		Short: "Measure a node's HTTP API against raw loopback TCP",
		Long: `Measure gets and puts of fixed-size blocks through the HTTP API with the Go client,
and as the same-run baseline a raw loopback TCP transfer of the same bytes per
operation at the same concurrency (one connection per worker, no framing).

Rows: tcp_get, http_get, tcp_put, http_put (those the mix has) with ops_per_s,
gbps, p50_ms, p99_ms, p999_ms; http rows carry baseline, baseline_gbps and ratio.

Without --addr a node is started in this process on a free loopback port, with
a temporary data directory (or --data-dir) and a DRAM tier of --dram-capacity.`,
		Example: `  yuebing bench http --value-size 4MiB --concurrency 8 --mix 1:0 --duration 10s
  yuebing bench http --addr 127.0.0.1:8080 --mix 90:10 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := hf.Parse()
			if err != nil {
				return usageError{err}
			}
			o.Progress = bench.NewProgress("http", http.Ticks(o))
			rep, err := http.Run(cmd.Context(), o)
			o.Progress.Done()
			if err != nil {
				return err
			}
			return rep.Write(cmd.OutOrStdout(), asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&hf.Addr, "addr", "", "node to measure, host:port (default: start one in this process)")
	f.StringVar(&hf.Token, "token", "", "bearer token, when the node runs with auth")
	f.StringVar(&hf.Namespace, "namespace", "bench/http", "namespace to write to")
	f.StringVar(&hf.ValueSize, "value-size", "4MiB", "size of every block")
	f.IntVar(&hf.Concurrency, "concurrency", 8, "requests in flight")
	f.StringVar(&hf.Mix, "mix", "1:0", "GET:PUT weights")
	f.DurationVar(&hf.Duration, "duration", 0, "time of the measurement and of the baseline (default 5s)")
	f.IntVar(&hf.Keys, "keys", 0, "working set of gets, in blocks (default max(2*concurrency, 16), at most 512MiB)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	f.StringVar(&hf.DRAMCapacity, "dram-capacity", "2GiB", "DRAM tier of the in-process node")
	f.BoolVar(&hf.Node.Prefault, "dram-prefault", false, "prefault the in-process node's DRAM arena, as a node that has run a while has it")
	f.StringVar(&hf.Node.DataDir, "data-dir", "", "data directory of the in-process node (default: a temporary directory)")
	return cmd
}
