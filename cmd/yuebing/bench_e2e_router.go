package main

import (
	"fmt"
	"time"

	"github.com/yuebing/yuebing/bench/e2e"
	"github.com/yuebing/yuebing/bench/http"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/server"
)

// e2eRouterFlags are `yuebing bench e2e`'s flags for --router.
type e2eRouterFlags struct {
	on       bool
	routings string
	slo      time.Duration
	pool     bool
	bw       float64
	load     float64
	side     bool
	prompts  string
}

func (r *e2eRouterFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&r.on, "router", false, "replay through the conductor's router in front of --engines engine simulators (default 4) publishing KV events, once per --routing; report TTFT, 429s, effective capacity and predicted against observed TTFT")
	f.StringVar(&r.routings, "routing", "conductor,round_robin,least_loaded", "with --router: routings to compare, comma-separated policy names")
	f.DurationVar(&r.slo, "ttft-slo", 0, "with --router: TTFT SLO of rejection and effective capacity (default: 1.25x the sample's longest uncached prefill at the run's time scale, at least 2x the mean)")
	f.BoolVar(&r.pool, "with-pool", false, "with --router: engines also use the yuebing node (--addr, or one in this process) as their shared KV pool")
	f.Float64Var(&r.load, "load", 0, "prefill load offered to each engine without caching (1: always busy), sets the time scale unless --compression or --time-scale is given (default: --compression 40; with --router 0.7)")
	f.StringVar(&r.prompts, "prompts", "ids", "with --router: how requests carry their prompts: ids (token ids) or chat (text messages, one per block of the trace, tokenized by the router and the engines)")
	f.BoolVar(&r.side, "side-by-side", false, "with --router: replay the routings at the same time instead of one after another")
	f.Float64Var(&r.bw, "bandwidth", 0, "with --router: the router's KV transfer estimate in Gbps (default: an adapter load measured at the start)")
}

// runBenchE2ERouter is `yuebing bench e2e --router`; ro holds the
// replay's options, validated.
func runBenchE2ERouter(cmd *cobra.Command, ro e2e.RouterOptions, asJSON bool, plot string, dramCapacity server.ByteSize, dataDir string) error {
	if ro.Pool && ro.Addr == "" {
		stop, addr, err := http.StartNode(http.NodeOptions{DRAMCapacity: int64(dramCapacity), DataDir: dataDir}, 64<<20)
		if err != nil {
			return err
		}
		defer stop()
		ro.Addr = addr
	}
	ro.Progress = bench.NewProgress("e2e --router", e2e.RouterTicks(ro))
	res, err := e2e.RunRouter(cmd.Context(), ro)
	ro.Progress.Done()
	if err != nil {
		return err
	}
	if plot != "" {
		if err := e2e.PlotRouter(res, plot); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "e2e --router: plot written to %s\n", plot)
	}
	return res.Report.Write(cmd.OutOrStdout(), asJSON)
}
