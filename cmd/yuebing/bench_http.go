package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/yuebing/yuebing/bench/http"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/server"
)

func newBenchHTTPCmd() *cobra.Command {
	var (
		o            http.Options
		asJSON       bool
		valueSize    string
		mix          string
		dramCapacity string
		dataDir      string
		prefault     bool
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
			n, err := parseSize(valueSize)
			if err != nil || n < 1 || n > 1<<30 {
				return usageErrorf("--value-size: %q is not a size from 1B to 1GiB", valueSize)
			}
			o.ValueSize = n
			g, p, ok := strings.Cut(mix, ":")
			gw, gerr := strconv.Atoi(strings.TrimSpace(g))
			pw, perr := strconv.Atoi(strings.TrimSpace(p))
			if !ok || gerr != nil || perr != nil || gw < 0 || pw < 0 || gw+pw == 0 || gw+pw > 1<<20 {
				return usageErrorf("--mix: %q is not GET:PUT weights like 1:0, 90:10 or 0:1", mix)
			}
			o.GetWeight, o.PutWeight = gw, pw
			if o.Concurrency < 1 || o.Concurrency > 1024 {
				return usageErrorf("--concurrency: %d, want 1 to 1024", o.Concurrency)
			}
			if o.Duration <= 0 {
				return usageErrorf("--duration: %v, want a positive duration like 10s", o.Duration)
			}
			if o.Addr == "" {
				stop, addr, err := startBenchNode(dramCapacity, dataDir, n, prefault)
				if err != nil {
					return err
				}
				defer stop()
				o.Addr = addr
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
	f.StringVar(&o.Addr, "addr", "", "node to measure, host:port (default: start one in this process)")
	f.StringVar(&o.Token, "token", "", "bearer token, when the node runs with auth")
	f.StringVar(&o.Namespace, "namespace", "bench/http", "namespace to write to")
	f.StringVar(&valueSize, "value-size", "4MiB", "size of every block")
	f.IntVar(&o.Concurrency, "concurrency", 8, "requests in flight")
	f.StringVar(&mix, "mix", "1:0", "GET:PUT weights")
	f.DurationVar(&o.Duration, "duration", 0, "time of the measurement and of the baseline (default 5s)")
	f.IntVar(&o.Keys, "keys", 0, "working set of gets, in blocks (default max(2*concurrency, 16), at most 512MiB)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	f.StringVar(&dramCapacity, "dram-capacity", "2GiB", "DRAM tier of the in-process node")
	f.BoolVar(&prefault, "dram-prefault", false, "prefault the in-process node's DRAM arena, as a node that has run a while has it")
	f.StringVar(&dataDir, "data-dir", "", "data directory of the in-process node (default: a temporary directory)")
	return cmd
}

// startBenchNode starts a node in this process for the benchmark.
func startBenchNode(dramCapacity, dataDir string, valueSize int64, prefault bool) (stop func(), addr string, err error) {
	dc, err := parseSize(dramCapacity)
	if err != nil {
		return nil, "", usageErrorf("--dram-capacity: %v", err)
	}
	cleanup := func() {}
	if dataDir == "" {
		if dataDir, err = os.MkdirTemp("", "yuebing-bench-http-"); err != nil {
			return nil, "", err
		}
		cleanup = func() { os.RemoveAll(dataDir) }
	}
	cfg := server.DefaultConfig()
	cfg.HTTP.Listen, cfg.RESP.Listen, cfg.Transfer.Listen = "127.0.0.1:0", "", ""
	cfg.DataDir = dataDir
	cfg.DRAM.Capacity = server.ByteSize(dc)
	cfg.DRAM.Prefault = prefault
	cfg.SSD.Capacity = server.ByteSize(max(4<<30, 4*valueSize))
	cfg.Limits.MaxBlockSize = server.ByteSize(max(valueSize, 256<<20))
	cfg.Limits.MaxInflightBytes = server.ByteSize(max(8*valueSize, 1<<30))
	cfg.Banner = io.Discard
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	node, err := server.Start(cfg)
	if err != nil {
		cleanup()
		return nil, "", fmt.Errorf("starting the in-process node: %w", err)
	}
	return func() {
		node.Shutdown()
		cleanup()
	}, node.Addr("http").String(), nil
}
