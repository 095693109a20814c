package enginesim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/internal/bytesize"
	"github.com/yuebing/yuebing/kvevents"
	"github.com/yuebing/yuebing/scheduler"
)

// RunOptions configure Run: the engine's Options and what a process puts
// around it, each field named by the flag of `yuebing engine-sim` that
// sets it, as Validate's errors name them.
type RunOptions struct {
	// Options configure the engine. Layout, Namespace, Prefill, Connector,
	// Events and Logger are set by Run from the fields below.
	Options
	// Listen is the HTTP address of the OpenAI-compatible API (--listen).
	Listen string
	// LayoutName and BlockTokens pick the KV layout preset (--layout,
	// --block-tokens).
	LayoutName  string
	BlockTokens int
	// PrefillProfile is a CSV of input_len,prefix_len,seconds
	// (--prefill-profile). Default: Options.Prefill's.
	PrefillProfile string
	// Node is the yuebing node used as the KV pool, http://host:port
	// (--yuebing); empty means engine-local caching only. Token is its
	// bearer token (--token); Cluster also asks the cluster query
	// (--cluster); SaveStaging is the host memory for layers being saved
	// (--save-staging).
	Node, Token string
	Cluster     bool
	SaveStaging string
	// LoadIfFaster is the inverse of Options.DisableLoadIfFaster
	// (--load-if-faster).
	LoadIfFaster bool
	// KVEvents and KVReplay are ZMQ endpoints to publish KV events and
	// serve their replays on (--kv-events, --kv-replay).
	KVEvents, KVReplay string
	// Banner receives the start-up banner, ending "ready". Default
	// os.Stdout.
	Banner io.Writer
}

// maxCount bounds the engine's counts on the command line: far past any
// real pool or batch, well short of an allocation that fails.
const maxCount = 1 << 24

// BindFlags sets *o to the defaults of `yuebing engine-sim` and binds its
// flags to o's fields.
func BindFlags(f *pflag.FlagSet, o *RunOptions) {
	*o = RunOptions{}
	f.StringVar(&o.Listen, "listen", "127.0.0.1:8000", "HTTP address of the OpenAI-compatible API")
	f.StringVar(&o.KVEvents, "kv-events", "", "publish vLLM KV events on this ZMQ PUB endpoint, tcp://host:port (port 0 picks one; default: none)")
	f.StringVar(&o.KVReplay, "kv-replay", "", "serve KV event replays on this ZMQ ROUTER endpoint, tcp://host:port (with --kv-events)")
	f.StringVar(&o.Node, "yuebing", "", "yuebing node to use as the KV pool, http://host:port (default: none, engine-local caching only)")
	f.StringVar(&o.Token, "token", "", "bearer token for the yuebing node")
	f.BoolVar(&o.Cluster, "cluster", false, "also ask the cluster query for prefixes the node does not hold (admin token)")
	f.StringVar(&o.Namespace, "namespace", "", "namespace of the blocks, tenant/model (default sim/LAYOUT)")
	f.StringVar(&o.LayoutName, "layout", "sim-70b", "KV layout preset: llama-3-8b, llama-3-70b, qwen2-7b, sim-70b")
	f.IntVar(&o.BlockTokens, "block-tokens", 512, "tokens per block (16 to 1024)")
	f.StringVar(&o.Name, "name", "engine-sim", "engine name in responses and metrics")
	f.IntVar(&o.PoolBlocks, "pool-blocks", 256, "KV pool size, in blocks")
	f.BoolVar(&o.DisablePrefixCache, "no-prefix-cache", false, "turn the engine's own prefix cache off")
	f.BoolVar(&o.LoadIfFaster, "load-if-faster", true, "load a yuebing hit only when that is estimated to be faster than computing it")
	f.StringVar(&o.PrefillProfile, "prefill-profile", "", "prefill profile CSV input_len,prefix_len,seconds (default: LLaMA3-70B on 8 x A800)")
	f.Float64Var(&o.TimeScale, "time-scale", 1, "multiply simulated compute times by this")
	f.DurationVar(&o.DecodeStep, "decode-step", 30*time.Millisecond, "time of one decode iteration, before --time-scale")
	f.IntVar(&o.MaxRunning, "max-running", 64, "largest decode batch")
	f.IntVar(&o.MaxWaiting, "max-waiting", 256, "requests waiting for prefill; more get 429")
	f.IntVar(&o.MaxTokens, "max-tokens", 4096, "largest max_tokens accepted")
	f.StringVar(&o.SaveStaging, "save-staging", "64MiB", "host memory for layers being saved to yuebing")
}

// Validate reports every problem of the options a command line can get
// wrong at once, each naming its flag and wrapping ErrInvalid. It does not
// read files or reach the node: Run reports those.
func (o *RunOptions) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	for _, f := range []struct {
		flag string
		v    int
	}{{"--pool-blocks", o.PoolBlocks}, {"--max-running", o.MaxRunning}, {"--max-waiting", o.MaxWaiting}, {"--max-tokens", o.MaxTokens}} {
		if f.v < 1 || f.v > maxCount {
			bad("%s: %d, want 1 to %d", f.flag, f.v, maxCount)
		}
	}
	if !(o.TimeScale > 0) || o.DecodeStep < 0 {
		bad("--time-scale must be positive and --decode-step not negative")
	}
	if _, err := adapter.Preset(o.LayoutName, o.BlockTokens); err != nil {
		bad("--layout/--block-tokens: %v", err)
	}
	if _, err := bytesize.Parse(o.SaveStaging); err != nil {
		bad("--save-staging: %v", err)
	}
	if o.KVReplay != "" && o.KVEvents == "" {
		bad("--kv-replay needs --kv-events")
	}
	return errors.Join(errs...)
}

// Run runs the simulator until ctx ends: the engine behind its OpenAI
// API on o.Listen, with its yuebing pool and KV event publisher when asked
// for. Invalid options are an error wrapping ErrInvalid, naming the flag.
func Run(ctx context.Context, o RunOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	layout, _ := adapter.Preset(o.LayoutName, o.BlockTokens)
	staging, _ := bytesize.Parse(o.SaveStaging)
	o.Layout, o.DisableLoadIfFaster = layout, !o.LoadIfFaster
	if o.Namespace == "" {
		o.Namespace = "sim/" + layout.Name
	}
	if o.PrefillProfile != "" {
		m, err := loadPrefill(o.PrefillProfile)
		if err != nil {
			return fmt.Errorf("%w: --prefill-profile: %v", ErrInvalid, err)
		}
		o.Prefill = m
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if o.Node != "" {
		cl, err := client.New(o.Node, client.Options{Token: o.Token})
		if err != nil {
			return fmt.Errorf("%w: --yuebing: %v", ErrInvalid, err)
		}
		conn, err := adapter.New(adapter.Options{Client: cl, Namespace: o.Namespace, Layout: layout, Cluster: o.Cluster, SaveStagingBytes: staging, Logger: o.Logger})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			conn.Close(cctx)
		}()
		o.Connector = conn
	}
	var pub *kvevents.Publisher
	if o.KVEvents != "" {
		var err error
		pub, err = kvevents.NewPublisher(kvevents.PublisherOptions{Endpoint: o.KVEvents, Replay: o.KVReplay, Logger: o.Logger})
		if err != nil {
			return fmt.Errorf("%w: --kv-events/--kv-replay: %v", ErrInvalid, err)
		}
		defer pub.Close()
		o.Events = pub
	}
	e, err := New(o.Options)
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			err = fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	loop := make(chan struct{})
	go func() {
		e.Run(ctx)
		close(loop)
	}()
	srv := &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	o.banner(e.Options(), ln.Addr(), pub)
	select {
	case <-ctx.Done():
	case err := <-served:
		cancel()
		<-loop
		return err
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer scancel()
	err = srv.Shutdown(sctx)
	<-loop
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// banner says what runs where; scripts wait for its last line, "ready".
func (o *RunOptions) banner(eo Options, addr net.Addr, pub *kvevents.Publisher) {
	w := o.Banner
	if w == nil {
		w = os.Stdout
	}
	l := eo.Layout
	fmt.Fprintf(w, "yuebing engine-sim (a simulator, not a model)\n")
	fmt.Fprintf(w, "  http       http://%s\n", addr)
	fmt.Fprintf(w, "  model      %s (%d layers, %d KiB per block of %d tokens)\n", eo.Model, l.Layers, l.BlockBytes()>>10, l.BlockTokens)
	fmt.Fprintf(w, "  pool       %d blocks in hbmsim, prefix cache %v\n", eo.PoolBlocks, !eo.DisablePrefixCache)
	if o.Node != "" {
		fmt.Fprintf(w, "  yuebing    %s (namespace %s)\n", o.Node, eo.Namespace)
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
}

func loadPrefill(path string) (*scheduler.PrefillModel, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return scheduler.ParsePrefillProfile(f)
}
