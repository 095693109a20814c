package main

import (
	"github.com/yuebing/yuebing/bench/router"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench"
)

func newBenchRouterCmd() *cobra.Command {
	var (
		rf     router.Flags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "router",
		Short: "Measure the latency the router adds to a request against calling the engine directly",
		Long: `Send the same completion (--prompt-tokens token ids, not streamed) one at a time
over loopback straight to a simulated engine that answers at once (the
baseline) and through the router of 'yuebing conductor' in front of it,
alternating in rounds of 100. The difference is the router's: parsing, chained
keys, Algorithm 1, the speculative entry and forwarding.

Rows: router_overhead with path direct and router: p50_ms, p99_ms; the router
row adds added_p50_ms, baseline (direct), baseline_p50_ms and ratio (direct
p50 over router p50).`,
		Example: `  yuebing bench router --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := rf.Parse()
			if err != nil {
				return usageError{err}
			}
			o.Progress = bench.NewProgress("router", router.Ticks(o))
			rep, err := router.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			return rep.Write(cmd.OutOrStdout(), asJSON)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	f.BoolVar(&rf.Quick, "quick", false, "200 requests per path")
	f.IntVar(&rf.Requests, "requests", 2000, "requests per path")
	f.IntVar(&rf.PromptTokens, "prompt-tokens", 2048, "prompt length in tokens")
	return cmd
}
