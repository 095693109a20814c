package main

import (
	"github.com/yuebing/yuebing/kvevents"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/enginesim"
	"github.com/yuebing/yuebing/internal/bytesize"
	"github.com/yuebing/yuebing/scheduler"
)

func newEngineSimCmd() *cobra.Command {
	var (
		listen, node, token, namespace, layoutName, profile, name, staging string
		kvEvents, kvReplay                                                 string
		blockTokens                                                        int
		noCache, cluster, loadIfFaster                                     bool
		o                                                                  enginesim.Options
	)
	cmd := &cobra.Command{
		Use:   "engine-sim",
		Short: "Run an inference engine simulator with an OpenAI-compatible API",
		Long: `Run a simulator of a vLLM-style inference engine: an OpenAI-compatible HTTP
server (POST /v1/completions with the prompt as token ids, streaming with
"stream": true; GET /v1/models, /health, /metrics) in front of a paged KV pool
with its own prefix cache, in simulated HBM (hbmsim). Prefill time comes from
the scheduler's prefill profile, scaled by --time-scale; decoding is one step
of --decode-step per iteration for the whole running batch.

With --yuebing the engine uses a yuebing node as its KV pool through the
adapter: each prompt's cached prefix is looked up and loaded layer by layer
while the prefill computes, and new blocks are saved as each layer completes.
KV bytes are real and deterministic from the tokens, and every loaded layer is
checked. Responses carry a "yuebing" object with the hit tokens by source and
tier, the load time and how much of it the prefill waited for. See
docs/adapter.md.

With --kv-events the engine publishes its prefix cache's changes as vLLM's
KV events (BlockStored, BlockRemoved) on a ZMQ PUB socket, with a replay
socket at --kv-replay, for 'yuebing conductor' to route by (docs/conductor.md).`,
		Example: `  yuebing engine-sim --listen 127.0.0.1:8000 --yuebing http://127.0.0.1:8080
  curl -s 127.0.0.1:8000/v1/completions -d '{"prompt":[1,2,3],"max_tokens":4}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range []struct {
				name string
				v    int
			}{{"--pool-blocks", o.PoolBlocks}, {"--max-running", o.MaxRunning}, {"--max-waiting", o.MaxWaiting}, {"--max-tokens", o.MaxTokens}} {
				if f.v < 1 || f.v > 1<<24 {
					return usageErrorf("%s: %d, want 1 to 16777216", f.name, f.v)
				}
			}
			if o.TimeScale <= 0 || o.DecodeStep < 0 {
				return usageErrorf("--time-scale must be positive and --decode-step not negative")
			}
			layout, err := adapter.Preset(layoutName, blockTokens)
			if err != nil {
				return usageErrorf("--layout/--block-tokens: %v", err)
			}
			o.Layout, o.Name, o.DisablePrefixCache, o.DisableLoadIfFaster = layout, name, noCache, !loadIfFaster
			if namespace == "" {
				namespace = "sim/" + layout.Name
			}
			o.Namespace = namespace
			if profile != "" {
				f, err := os.Open(profile)
				if err != nil {
					return usageErrorf("--prefill-profile: %v", err)
				}
				o.Prefill, err = scheduler.ParsePrefillProfile(f)
				f.Close()
				if err != nil {
					return usageErrorf("--prefill-profile: %v", err)
				}
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			o.Logger = log
			if node != "" {
				cl, err := client.New(node, client.Options{Token: token})
				if err != nil {
					return usageErrorf("--yuebing: %v", err)
				}
				st, err := bytesize.Parse(staging)
				if err != nil {
					return usageErrorf("--save-staging: %v", err)
				}
				conn, err := adapter.New(adapter.Options{Client: cl, Namespace: namespace, Layout: layout, Cluster: cluster, SaveStagingBytes: st, Logger: log})
				if err != nil {
					return usageErrorf("%v", err)
				}
				defer func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					conn.Close(ctx)
				}()
				o.Connector = conn
			}
			var pub *kvevents.Publisher
			if kvEvents != "" {
				pub, err = kvevents.NewPublisher(kvevents.PublisherOptions{Endpoint: kvEvents, Replay: kvReplay, Logger: log})
				if err != nil {
					return usageErrorf("--kv-events/--kv-replay: %v", err)
				}
				defer pub.Close()
				o.Events = pub
			} else if kvReplay != "" {
				return usageErrorf("--kv-replay needs --kv-events")
			}
			e, err := enginesim.New(o)
			if err != nil {
				return usageErrorf("%v", err)
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			loop := make(chan struct{})
			go func() {
				e.Run(ctx)
				close(loop)
			}()
			srv := &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 10 * time.Second}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			w := cmd.OutOrStdout()
			eo := e.Options()
			fmt.Fprintf(w, "yuebing engine-sim (a simulator, not a model)\n")
			fmt.Fprintf(w, "  http       http://%s\n", ln.Addr())
			fmt.Fprintf(w, "  model      %s (%d layers, %d KiB per block of %d tokens)\n", eo.Model, layout.Layers, layout.BlockBytes()>>10, layout.BlockTokens)
			fmt.Fprintf(w, "  pool       %d blocks in hbmsim, prefix cache %v\n", eo.PoolBlocks, !noCache)
			if node != "" {
				fmt.Fprintf(w, "  yuebing    %s (namespace %s)\n", node, namespace)
			} else {
				fmt.Fprintf(w, "  yuebing    none (engine-local caching only)\n")
			}
			if pub != nil {
				fmt.Fprintf(w, "  kv-events  %s\n", pub.Endpoint())
				if r := pub.ReplayEndpoint(); r != "" {
					fmt.Fprintf(w, "  kv-replay  %s\n", r)
				}
			}
			fmt.Fprintf(w, "  ready\n")
			select {
			case <-ctx.Done():
			case err := <-served:
				cancel()
				<-loop
				return err
			}
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			err = srv.Shutdown(sctx)
			<-loop
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8000", "HTTP address of the OpenAI-compatible API")
	f.StringVar(&kvEvents, "kv-events", "", "publish vLLM KV events on this ZMQ PUB endpoint, tcp://host:port (port 0 picks one; default: none)")
	f.StringVar(&kvReplay, "kv-replay", "", "serve KV event replays on this ZMQ ROUTER endpoint, tcp://host:port (with --kv-events)")
	f.StringVar(&node, "yuebing", "", "yuebing node to use as the KV pool, http://host:port (default: none, engine-local caching only)")
	f.StringVar(&token, "token", "", "bearer token for the yuebing node")
	f.BoolVar(&cluster, "cluster", false, "also ask the cluster query for prefixes the node does not hold (admin token)")
	f.StringVar(&namespace, "namespace", "", "namespace of the blocks, tenant/model (default sim/LAYOUT)")
	f.StringVar(&layoutName, "layout", "sim-70b", "KV layout preset: llama-3-8b, llama-3-70b, qwen2-7b, sim-70b")
	f.IntVar(&blockTokens, "block-tokens", 512, "tokens per block (16 to 1024)")
	f.StringVar(&name, "name", "engine-sim", "engine name in responses and metrics")
	f.IntVar(&o.PoolBlocks, "pool-blocks", 256, "KV pool size, in blocks")
	f.BoolVar(&noCache, "no-prefix-cache", false, "turn the engine's own prefix cache off")
	f.BoolVar(&loadIfFaster, "load-if-faster", true, "load a yuebing hit only when that is estimated to be faster than computing it")
	f.StringVar(&profile, "prefill-profile", "", "prefill profile CSV input_len,prefix_len,seconds (default: LLaMA3-70B on 8 x A800)")
	f.Float64Var(&o.TimeScale, "time-scale", 1, "multiply simulated compute times by this")
	f.DurationVar(&o.DecodeStep, "decode-step", 30*time.Millisecond, "time of one decode iteration, before --time-scale")
	f.IntVar(&o.MaxRunning, "max-running", 64, "largest decode batch")
	f.IntVar(&o.MaxWaiting, "max-waiting", 256, "requests waiting for prefill; more get 429")
	f.IntVar(&o.MaxTokens, "max-tokens", 4096, "largest max_tokens accepted")
	f.StringVar(&staging, "save-staging", "64MiB", "host memory for layers being saved to yuebing")
	return cmd
}

// adapterPreset is adapter.Preset, for flags.
func adapterPreset(name string, blockTokens int) (adapter.Layout, error) {
	return adapter.Preset(name, blockTokens)
}
