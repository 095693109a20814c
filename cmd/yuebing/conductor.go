package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/scheduler"
	"github.com/yuebing/yuebing/server"
)

func newConductorCmd() *cobra.Command {
	var listen, tokensFile string
	var insecure bool
	cfg := server.DefaultConductorConfig()
	var lim scheduler.Limits
	lim.EnsureDefaults()
	var rc server.RouterConfig
	cmd := &cobra.Command{
		Use:   "conductor",
		Short: "Run the conductor: KV-cache-aware scheduling of prefill and decode instances",
		Long: `Run the conductor alone: an HTTP service that places each request on the prefill
instance with the shortest estimated TTFT given where its prefix is cached
(Mooncake's Algorithm 1), picks a decode instance within the TBT SLO, and
rejects with 429 what cannot be served in time. Instances register, report
their load and the blocks they hold; see docs/conductor.md.

A listen address off loopback needs --auth-tokens-file (the /v1/conductor
endpoints then take an admin token, the OpenAI ones any token) or --insecure.`,
		Example: `  yuebing conductor --listen 127.0.0.1:8090 --rejection predicted
  yuebing conductor --listen 127.0.0.1:8000 --model llama --namespace acme/llama \
    --engine id=e0,url=http://10.0.0.5:8000,events=tcp://10.0.0.5:5557,replay=tcp://10.0.0.5:5558`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rc.Enabled() {
				if !cmd.Flags().Changed("block-size") {
					cfg.BlockSize = 16 // vLLM's, which the engines' events carry
				}
				rc.BlockSize = cfg.BlockSize
				err := server.RunRouter(cmd.Context(), server.RouterOptions{
					Listen: listen, Router: rc, Conductor: cfg,
					TokensFile: tokensFile, Insecure: insecure,
					Banner:    cmd.ErrOrStderr(),
					FieldName: func(f string) string { return "--" + conductorFlags[f] },
				})
				if errors.Is(err, server.ErrInvalidConfig) {
					return usageError{err}
				}
				return err
			}
			err := server.RunConductor(cmd.Context(), server.ConductorOptions{
				Listen: listen, Config: cfg,
				TokensFile: tokensFile, Insecure: insecure,
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
	f.StringVar(&tokensFile, "auth-tokens-file", "", "YAML file of bearer tokens (token: {tenant: NAME, role: admin|tenant}): /v1/conductor takes an admin's, the OpenAI endpoints any")
	f.BoolVar(&insecure, "insecure", false, "allow a non-loopback listener without authentication")
	f.StringVar(&cfg.Policy, "policy", cfg.Policy, "prefill placement: conductor or cache-global (Algorithm 1), least_loaded or load, round_robin or round-robin, cache-local, random")
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
	f.Var(engineFlag{&rc.Engines}, "engine", "an engine to route to, repeatable: id=e0,url=http://host:8000[,events=tcp://host:5557][,replay=tcp://host:5558][,role=both|prefill|decode][,node=http://host:8080]; with engines the conductor serves /v1/completions, /v1/chat/completions and /v1/models (block size 16 unless --block-size)")
	f.StringVar(&rc.Model, "model", "", "model name the router serves (with --engine)")
	f.StringVar(&rc.Namespace, "namespace", "", "key namespace tenant/model of the engines' prompts (with --engine)")
	f.StringVar(&rc.Encoding, "encoding", "cl100k_base", "tokenizer of text prompts: cl100k_base, o200k_base, p50k_base or r50k_base")
	f.StringSliceVar(&rc.Pool, "pool", nil, "yuebing node HTTP bases whose cluster index the router queries, repeatable")
	f.StringVar(&rc.PoolToken, "pool-token", "", "admin token for the pool nodes' API")
	f.StringVar(&rc.EngineAPIKey, "engine-api-key", "", "bearer token the engines were started with (vLLM's --api-key); without it the client's Authorization is passed on")
	f.DurationVar(&rc.SpeculativeTTL, "speculative-ttl", 2*time.Second, "how long a routing decision counts the prompt as cached on its engine before events confirm it")
	f.DurationVar(&rc.ProbeInterval, "probe-interval", time.Second, "how often engines' /metrics are read")
	f.IntVar(&rc.ProbeFailures, "probe-failures", 3, "unanswered /metrics probes in a row that take an engine out (a refused connection does at once)")
	f.DurationVar(&rc.RetryAfter, "retry-after", time.Second, "Retry-After of a 429 from early rejection")
	f.IntVar(&rc.MaxPromptBytes, "max-prompt-bytes", 1<<20, "longest text prompt (a completion's string, a chat's messages) tokenized; longer ones get 400")
	f.IntVar(&rc.MaxConcurrentPrepares, "max-concurrent-prepares", 0, "requests read and tokenized at once, the rest waiting their turn (0: GOMAXPROCS)")
	return cmd
}

// conductorFlags names the flag of each conductor configuration field.
var conductorFlags = map[string]string{
	"policy": "policy", "rejection": "rejection", "block_size": "block-size",
	"balancing_threshold": "threshold", "bandwidth_gbps": "bandwidth",
	"kv_bytes_per_token": "kv-bytes-per-token", "ttft_slo": "ttft-slo", "tbt_slo": "tbt-slo",
	"decode_time": "td", "prefill_profile": "prefill-profile", "decode_profile": "decode-profile",
	"auth.tokens_file": "auth-tokens-file", "insecure": "insecure",
}
