package main

import (
	"time"

	"github.com/yuebing/yuebing/bench/sched"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench"
)

func newBenchSchedCmd() *cobra.Command {
	var (
		trace, policies, rejections     string
		prefill, decode, requests       int
		overloadP, overloadD            int
		cache, pool, decodeCap          string
		speed, overloadSpeed, bandwidth float64
		threshold                       float64
		ttftSLO, tbtSLO, td             time.Duration
		prefillProfile, decodeProfile   string
		plotPath                        string
		asJSON                          bool
	)
	cmd := &cobra.Command{
		Use:   "sched",
		Short: "Simulate a prefill/decode cluster under the conductor on a request trace",
		Long: `Replay a Mooncake-format trace through a discrete-event simulation of P prefill
and D decode instances driven by the conductor's scheduler: each prefill
instance has its own LRU cache of --cache tokens, prefill times come from the
prefill profile, decode iterations from the TBT model, KV transfers run at
--bandwidth. Reports average and p90 TTFT, p90 TBT, effective request capacity
(the share of requests meeting both SLOs), cache hit rate, rejected share and
the standard deviation of the prefill and decode load over time.

With only --trace it runs the default suite: every policy without rejection at
the trace's pace (16 instances, P/D 1:1), then cache-global with none, early
and predicted rejection at --overload-speed. With --policy or --rejection it
runs their cross product at --speed.`,
		Example: `  yuebing bench sched --trace traces/conversation_trace.jsonl --plot sched.png
  yuebing bench sched --trace traces/conversation_trace.jsonl --policy cache-global --rejection early,predicted --speed 3 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if trace == "" {
				return usageErrorf("--trace is required")
			}
			sf := sched.Flags{
				Policies: policies, Rejections: rejections, Custom: cmd.Flags().Changed("speed"),
				Prefill: prefill, Decode: decode, Requests: requests,
				OverloadPrefill: overloadP, OverloadDecode: overloadD,
				Cache: cache, GlobalPool: pool, DecodeCapacity: decodeCap,
				Speed: speed, OverloadSpeed: overloadSpeed, Bandwidth: bandwidth, Threshold: threshold,
				TTFTSLO: ttftSLO, TBTSLO: tbtSLO, TD: td,
				PrefillProfile: prefillProfile, DecodeProfile: decodeProfile,
			}
			cells, err := sf.Cells()
			if err != nil {
				return usageError{err}
			}
			t, err := bench.OpenTrace(trace)
			if err != nil {
				return err
			}
			for i := range cells {
				cells[i].Options.Trace = t
			}
			if err := sched.Run(cmd.Context(), cells, 0, true); err != nil {
				return err
			}
			if plotPath != "" {
				if err := sched.Plot(cells, plotPath); err != nil {
					return err
				}
			}
			return sched.Report(cells).Write(cmd.OutOrStdout(), asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&trace, "trace", "", "trace file to replay (required)")
	f.StringVar(&policies, "policy", "", "prefill policies, comma-separated: random, load, cache-local, cache-global")
	f.StringVar(&rejections, "rejection", "", "overload policies, comma-separated: none, early, predicted")
	f.IntVar(&prefill, "prefill", 8, "prefill instances")
	f.IntVar(&decode, "decode", 8, "decode instances")
	f.StringVar(&cache, "cache", "3M", "local cache of each prefill instance, in tokens")
	f.StringVar(&pool, "global-pool", "0", "extra global pool (store) of this many tokens that every prefilled block is written to; 0 for none")
	f.StringVar(&decodeCap, "decode-capacity", "1.2M", "KV capacity of each decode instance, in tokens; past it iterations slow down (swapping)")
	f.Float64Var(&speed, "speed", 1, "replay speed: 2 halves every gap between arrivals")
	f.Float64Var(&overloadSpeed, "overload-speed", sched.DefaultOverloadSpeed, "replay speed of the default suite's overload experiment")
	f.IntVar(&overloadP, "overload-prefill", sched.DefaultOverloadPrefill, "prefill instances of the default suite's overload experiment")
	f.IntVar(&overloadD, "overload-decode", sched.DefaultOverloadDecode, "decode instances of the default suite's overload experiment")
	f.Float64Var(&bandwidth, "bandwidth", 800, "KV transfer bandwidth between instances, in Gbps")
	f.Float64Var(&threshold, "threshold", 1.25, "kvcache_balancing_threshold of Algorithm 1")
	f.DurationVar(&ttftSLO, "ttft-slo", 30*time.Second, "TTFT SLO")
	f.DurationVar(&tbtSLO, "tbt-slo", 100*time.Millisecond, "TBT SLO")
	f.DurationVar(&td, "td", 0, "uniform decode time t_d of predicted rejection; 0 is the trace's mean output length times the TBT SLO")
	f.IntVar(&requests, "requests", 0, "replay only the first N requests; 0 for all")
	f.StringVar(&prefillProfile, "prefill-profile", "", "prefill profile CSV (input_len,prefix_len,seconds); default: LLaMA3-70B on 8xA800 from the paper's model")
	f.StringVar(&decodeProfile, "decode-profile", "", "decode profile CSV (batch_size,kv_tokens,seconds); default: the built-in TBT model")
	f.StringVar(&plotPath, "plot", "", "write the prefill and decode load over time as a PNG here")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"results":[...]} instead of a table`)
	return cmd
}
