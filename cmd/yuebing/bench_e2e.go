package main

import (
	"errors"

	"github.com/spf13/cobra"
	"github.com/yuebing/yuebing/bench/e2e"
	"github.com/yuebing/yuebing/bench/http"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/server"
)

func newBenchE2ECmd() *cobra.Command {
	var (
		o              e2e.Options
		asJSON         bool
		plot, dataDir  string
		dramCapacity   = server.ByteSize(2 << 30)
		layout         string
		blockTokensArg int
		ro             e2eRouterFlags
	)
	cmd := &cobra.Command{
		Use:   "e2e",
		Short: "Replay a trace against engine simulators with and without the yuebing pool; report TTFT",
		Long: `Replay a sample of a Mooncake trace against --engines engine simulators
(yuebing engine-sim's engine, in this process) and a real yuebing node, three
times: no caching (recompute), each engine's own prefix cache (local), and the
engines' caches plus the yuebing pool through the adapter (pool). Requests are
routed round robin, the same in every mode. KV bytes are real: every pool hit
is loaded layer by layer from the node while the layer's compute runs, and
checked. Whole conversations are sampled (--requests); arrival times are sped
up to span --duration (or by --scale), and compute runs --compression times
slower than that (or by --time-scale), so a conversation's next turn still
comes long after the previous one's first token, as in the trace. --load
sets compute's speed instead by the prefill load it offers each engine
without caching (0.5: busy half the time); TTFT gains grow with it, as
queueing does.

Rows: e2e (one per mode: ttft_mean_s, ttft_p50_s, ttft_p90_s, ttft_p99_s,
saved_tokens, hit tokens by tier, load and save bytes, overlap_frac = the part
of load time hidden behind compute; the pool row has baseline local,
ttft_vs_baseline and ratio = speed-up); adapter_load (a Load of a stored
prefix against a raw multi-get of the same bytes stored as whole blocks, for
the run's layout and for Llama-3-8B); disagg (prefill/decode layer
streaming: hidden_frac of the transfer taken off the critical path).

Without --addr a node is started in this process on a free loopback port.

With --router the sample is replayed through the conductor's router instead
(see --router).`,
		Example: `  yuebing bench e2e --trace traces/conversation_trace.jsonl --quick
  yuebing bench e2e --trace traces/conversation_trace.jsonl --requests 300 --json --plot e2e.png
  yuebing bench e2e --router --trace traces/conversation_trace.jsonl --quick --json --plot e2e-router.png`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Trace == "" {
				return usageErrorf("--trace is required")
			}
			ef := e2e.Flags{Options: o, Layout: layout, BlockTokens: blockTokensArg, Load: ro.load}
			o, err := ef.Parse()
			if ro.on {
				rf := e2e.RouterFlags{Routings: ro.routings, TTFTSLO: ro.slo, Pool: ro.pool, Bandwidth: ro.bw,
					Load: ro.load, SideBySide: ro.side, Prompts: ro.prompts}
				rop, rerr := rf.Parse(o, cmd.ErrOrStderr())
				if err := errors.Join(err, rerr); err != nil {
					return usageError{err}
				}
				return runBenchE2ERouter(cmd, rop, asJSON, plot, dramCapacity, dataDir)
			}
			if err != nil {
				return usageError{err}
			}
			if o.Addr == "" {
				stop, addr, err := http.StartNode(http.NodeOptions{DRAMCapacity: int64(dramCapacity), DataDir: dataDir}, 64<<20)
				if err != nil {
					return err
				}
				defer stop()
				o.Addr = addr
			}
			o.Progress = bench.NewProgress("e2e", e2e.Ticks(o))
			res, err := e2e.Run(cmd.Context(), o)
			o.Progress.Done()
			if err != nil {
				return err
			}
			if plot != "" {
				if err := e2e.Plot(res, plot); err != nil {
					return err
				}
			}
			return res.Report.Write(cmd.OutOrStdout(), asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Trace, "trace", "", "Mooncake trace file (JSONL) to replay (required)")
	f.StringVar(&o.Addr, "addr", "", "yuebing node to use, http://host:port (default: start one in this process)")
	f.IntVar(&o.Engines, "engines", 0, "engine simulators (default 2; with --router 4)")
	f.IntVar(&o.Requests, "requests", 0, "sample size in requests, whole conversations (default 600; --quick 200)")
	f.IntVar(&o.MaxInput, "max-input", 0, "leave out prompts longer than this, tokens (default 16384; --quick 8192)")
	f.IntVar(&o.MaxOutput, "max-output", 0, "cap generated tokens per request (default 16; --quick 4)")
	f.DurationVar(&o.Duration, "duration", 0, "span of the replay, sets the arrival speed-up (default 60s; --quick 20s)")
	f.Float64Var(&o.Scale, "scale", 0, "arrival speed-up over the trace's timestamps (default: from --duration)")
	f.Float64Var(&o.Compression, "compression", 0, "how much faster arrivals run than compute (default 40)")
	f.Float64Var(&o.TimeScale, "time-scale", 0, "multiply simulated compute times by this (default: --compression / --scale)")
	f.IntVar(&o.PoolBlocks, "pool-blocks", 0, "each engine's HBM pool in blocks (default 48; with --router sized to keep blocks as long as a real engine does, at least 48)")
	f.StringVar(&layout, "layout", "", "KV layout preset (default sim-70b)")
	f.IntVar(&blockTokensArg, "block-tokens", 512, "tokens per block of --layout")
	f.IntVar(&o.Rounds, "rounds", 0, "replay the sample this many times per mode, the modes' order rotating, rows pooling the rounds (default 1)")
	f.BoolVar(&o.LoadAlways, "load-always", false, "engines load every pool hit, even when computing it is estimated to be faster")
	f.BoolVar(&o.Quick, "quick", false, "a reduced replay that finishes in under two minutes")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	f.StringVar(&plot, "plot", "", "also draw the TTFT distributions and token sources to this PNG file")
	f.Var(&dramCapacity, "dram-capacity", "DRAM tier of the in-process node")
	f.StringVar(&dataDir, "data-dir", "", "data directory of the in-process node (default: a temporary directory)")
	ro.register(f)
	return cmd
}
