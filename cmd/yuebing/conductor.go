package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/scheduler"
	"github.com/yuebing/yuebing/server"
)

func newConductorCmd() *cobra.Command {
	var (
		listen, policy, rejection     string
		prefillProfile, decodeProfile string
		blockSize, maxTokens, maxKeys int
		threshold, bandwidth          float64
		kvBytes                       int64
		ttftSLO, tbtSLO, td           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "conductor",
		Short: "Run the conductor: KV-cache-aware scheduling of prefill and decode instances",
		Long: `Run the conductor alone: an HTTP service that places each request on the prefill
instance with the shortest estimated TTFT given where its prefix is cached
(Mooncake's Algorithm 1), picks a decode instance within the TBT SLO, and
rejects with 429 what cannot be served in time. Instances register, report
their load and the blocks they hold; see docs/conductor.md.`,
		Example: `  yuebing conductor --listen 127.0.0.1:8090 --rejection predicted`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := scheduler.DriverOptions{Core: scheduler.Options{
				BlockSize:          blockSize,
				BalancingThreshold: threshold,
				TTFTSLO:            ttftSLO,
				TBTSLO:             tbtSLO,
				Bandwidth:          bandwidth * 1e9 / 8,
				KVBytesPerToken:    kvBytes,
				DecodeTime:         td,
			}}
			var err error
			if opts.Core.Policy, err = scheduler.ParsePolicy(policy); err != nil {
				return usageErrorf("--policy: %v", err)
			}
			if opts.Core.Rejection, err = scheduler.ParseRejection(rejection); err != nil {
				return usageErrorf("--rejection: %v", err)
			}
			if err := block.ValidateBlockSize(blockSize); err != nil {
				return usageErrorf("--block-size: %v", err)
			}
			switch {
			case threshold < 1:
				return usageErrorf("--threshold: %v, want >= 1", threshold)
			case bandwidth <= 0:
				return usageErrorf("--bandwidth: %v Gbps, want > 0", bandwidth)
			case kvBytes < 1:
				return usageErrorf("--kv-bytes-per-token: %d, want > 0", kvBytes)
			case ttftSLO <= 0 || tbtSLO <= 0 || td <= 0:
				return usageErrorf("--ttft-slo, --tbt-slo, --td: want > 0")
			case maxTokens < 1 || maxKeys < 1:
				return usageErrorf("--max-tokens, --max-keys: want > 0")
			}
			if err := loadProfiles(&opts.Core, prefillProfile, decodeProfile); err != nil {
				return err
			}
			return server.RunConductor(cmd.Context(), server.ConductorOptions{
				Listen: listen, Driver: opts,
				Limits: scheduler.Limits{MaxTokens: maxTokens, MaxKeys: maxKeys},
				Banner: cmd.ErrOrStderr(),
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8090", "HTTP listen address")
	f.StringVar(&policy, "policy", "cache-global", "prefill placement: random, load, cache-local or cache-global (Algorithm 1)")
	f.StringVar(&rejection, "rejection", "predicted", "overload policy: none, early or predicted")
	f.IntVar(&blockSize, "block-size", block.DefaultBlockSize, "tokens per block key")
	f.Float64Var(&threshold, "threshold", 1.25, "kvcache_balancing_threshold: pull a remote prefix when it is this many times longer than the local one")
	f.Float64Var(&bandwidth, "bandwidth", 800, "KV transfer bandwidth between instances, in Gbps")
	f.Int64Var(&kvBytes, "kv-bytes-per-token", 320<<10, "KV cache bytes per token of the model (LLaMA3-70B: 327680)")
	f.DurationVar(&ttftSLO, "ttft-slo", 30*time.Second, "TTFT SLO")
	f.DurationVar(&tbtSLO, "tbt-slo", 100*time.Millisecond, "TBT SLO")
	f.DurationVar(&td, "td", 30*time.Second, "uniform decode time t_d of predicted rejection")
	f.StringVar(&prefillProfile, "prefill-profile", "", "prefill profile CSV (input_len,prefix_len,seconds); default: LLaMA3-70B on 8xA800 from the paper's model")
	f.StringVar(&decodeProfile, "decode-profile", "", "decode profile CSV (batch_size,kv_tokens,seconds); default: the built-in TBT model")
	f.IntVar(&maxTokens, "max-tokens", 1<<21, "most tokens one schedule or query request may carry")
	f.IntVar(&maxKeys, "max-keys", 1<<16, "most keys one request or block update may carry")
	return cmd
}
