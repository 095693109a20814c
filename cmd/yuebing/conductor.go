package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/scheduler"
	"github.com/yuebing/yuebing/server"
)

func newConductorCmd() *cobra.Command {
	var listen string
	cfg := server.DefaultConductorConfig()
	var lim scheduler.Limits
	lim.EnsureDefaults()
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
			err := server.RunConductor(cmd.Context(), server.ConductorOptions{
				Listen: listen, Config: cfg,
				Limits:    lim,
				Banner:    cmd.ErrOrStderr(),
				FieldName: func(f string) string { return "--" + conductorFlags[f] },
			})
			if errors.Is(err, server.ErrInvalidConfig) {
				return usageError{err}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8090", "HTTP listen address")
	f.StringVar(&cfg.Policy, "policy", cfg.Policy, "prefill placement: random, load, cache-local or cache-global (Algorithm 1)")
	f.StringVar(&cfg.Rejection, "rejection", cfg.Rejection, "overload policy: none, early or predicted")
	f.IntVar(&cfg.BlockSize, "block-size", cfg.BlockSize, "tokens per block key")
	f.Float64Var(&cfg.BalancingThreshold, "threshold", cfg.BalancingThreshold, "kvcache_balancing_threshold: pull a remote prefix when it is this many times longer than the local one")
	f.Float64Var(&cfg.BandwidthGbps, "bandwidth", cfg.BandwidthGbps, "KV transfer bandwidth between instances, in Gbps")
	f.Var(&cfg.KVBytesPerToken, "kv-bytes-per-token", "KV cache bytes per token of the model (LLaMA3-70B: 327680)")
	f.DurationVar(&cfg.TTFTSLO, "ttft-slo", cfg.TTFTSLO, "TTFT SLO")
	f.DurationVar(&cfg.TBTSLO, "tbt-slo", cfg.TBTSLO, "TBT SLO")
	f.DurationVar(&cfg.DecodeTime, "td", cfg.DecodeTime, "uniform decode time t_d of predicted rejection")
	f.StringVar(&cfg.PrefillProfile, "prefill-profile", "", "prefill profile CSV (input_len,prefix_len,seconds); default: LLaMA3-70B on 8xA800 from the paper's model")
	f.StringVar(&cfg.DecodeProfile, "decode-profile", "", "decode profile CSV (batch_size,kv_tokens,seconds); default: the built-in TBT model")
	f.IntVar(&lim.MaxTokens, "max-tokens", lim.MaxTokens, "most tokens one schedule or query request may carry")
	f.IntVar(&lim.MaxKeys, "max-keys", lim.MaxKeys, "most keys one request or block update may carry")
	return cmd
}

// conductorFlags names the flag of each conductor configuration field.
var conductorFlags = map[string]string{
	"policy": "policy", "rejection": "rejection", "block_size": "block-size",
	"balancing_threshold": "threshold", "bandwidth_gbps": "bandwidth",
	"kv_bytes_per_token": "kv-bytes-per-token", "ttft_slo": "ttft-slo", "tbt_slo": "tbt-slo",
	"decode_time": "td", "prefill_profile": "prefill-profile", "decode_profile": "decode-profile",
}
