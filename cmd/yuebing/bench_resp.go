package main

import (
	"strings"

	"github.com/yuebing/yuebing/bench/resp"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench"
)

func newBenchRespCmd() *cobra.Command {
	var (
		o        resp.Options
		asJSON   bool
		sizes    string
		dramCap  string
		ssdCap   string
		totalStr string
		flowSize string
	)
	cmd := &cobra.Command{
		Use:   "resp-vs-redis",
		Short: "Compare the Redis front end with redis-server under redis-benchmark",
		Long: `Run the same redis-benchmark command lines (-t set,get -c 8 -d SIZE, and -P 16 at
the smallest size) against yuebing's Redis front end, served in this process
over a DRAM + SSD store, and against redis-server (--save '' --appendonly no
--io-threads 1, or --redis-io-threads, pinned or not) on a free port. Each
case runs --repeat times per server, alternating which goes first; the median
is reported.

Rows: set_SIZE, get_SIZE, set_SIZE_p16, get_SIZE_p16; small values,
set/get/incr/exists_SIZE_cN at 3 and 28 bytes with 8 and 50 connections;
lmcache_flow, LMCache's two-key redis:// flow (SET <k>kv_bytes, SET
<k>metadata, EXISTS <k>metadata, GET <k>metadata, GET <k>kv_bytes) over
--flow-clients connections, ops_per_sec in chunks per second. Each row has
op, ops_per_sec, mb_per_sec, baseline (redis-server), baseline_ops_per_sec
and ratio, and each server's CPU time per request (cpu_us_per_op,
baseline_cpu_us_per_op, cpu_ratio; the tests of one redis-benchmark run share
it; lmcache_flow has none, its client runs in this process). On a machine
with few cores, --pin keeps the client and the servers on separate CPUs.
Needs redis-server and redis-benchmark (Debian packages redis-server and
redis-tools).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sizes != "" {
				for _, s := range strings.Split(sizes, ",") {
					n, err := parseSize(s)
					if err != nil || n <= 0 {
						return usageErrorf("--sizes: %q is not a size like 4096 or 1MiB", s)
					}
					o.Sizes = append(o.Sizes, n)
				}
			}
			for _, f := range []struct {
				name, val string
				dst       *int64
			}{{"--dram-capacity", dramCap, &o.DRAMCapacity}, {"--ssd-capacity", ssdCap, &o.SSDCapacity}, {"--bytes", totalStr, &o.Bytes}} {
				if f.val == "" {
					continue
				}
				n, err := parseSize(f.val)
				if err != nil || n <= 0 {
					return usageErrorf("%s: %q is not a size like 2GiB", f.name, f.val)
				}
				*f.dst = n
			}
			if flowSize != "" {
				n, err := parseSize(flowSize)
				if err != nil || n <= 0 {
					return usageErrorf("--flow-chunk: %q is not a size like 32MiB", flowSize)
				}
				o.FlowChunkBytes = n
			}
			if o.RedisIOThreads < 0 || o.FlowClients < 0 {
				return usageErrorf("--redis-io-threads and --flow-clients must not be negative")
			}
			if o.Clients < 0 || o.Clients > 10000 {
				return usageErrorf("--clients: must be in [1, 10000]")
			}
			if o.Pipeline < 0 || o.Repeat < 0 {
				return usageErrorf("--pipeline and --repeat must not be negative")
			}
			o.Progress = bench.NewProgress("resp-vs-redis", int64(resp.Runs(o)))
			rep, err := resp.Run(cmd.Context(), o)
			o.Progress.Done()
			if err != nil {
				return err
			}
			return rep.Write(cmd.OutOrStdout(), asJSON)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	f.BoolVar(&o.Quick, "quick", false, "a tenth of the requests, one run per case")
	f.StringVar(&sizes, "sizes", "", "value sizes, comma-separated (default 4096,1MiB,4MiB)")
	f.IntVar(&o.Clients, "clients", 0, "redis-benchmark connections, -c (default 8)")
	f.IntVar(&o.Pipeline, "pipeline", 0, "-P of the extra run at the smallest size (default 16; 1: none)")
	f.IntVar(&o.Threads, "threads", 0, "redis-benchmark --threads (default: one thread)")
	f.BoolVar(&o.Pin, "pin", false, "run redis-benchmark on CPU 0 and the servers on the other CPUs (needs taskset)")
	f.IntVar(&o.RedisIOThreads, "redis-io-threads", 0, "redis-server's --io-threads, pinned or not (default 1)")
	f.StringVar(&flowSize, "flow-chunk", "", "lmcache_flow's chunk size (default 32MiB: 256 tokens of a 32-layer model with 8 KV heads of 128, fp16, as Mistral-7B or Llama-3-8B; 256KiB with --quick)")
	f.IntVar(&o.FlowClients, "flow-clients", 0, "lmcache_flow's connections (default 32)")
	f.BoolVar(&o.NoFlow, "no-flow", false, "leave out the lmcache_flow row")
	f.BoolVar(&o.NoSmall, "no-small", false, "leave out the small-value rows")
	f.IntVar(&o.Repeat, "repeat", 0, "runs per case and server; the median is reported (default 3)")
	f.StringVar(&totalStr, "bytes", "", "bytes per run: requests = bytes/size within [200, 100000] (default 2GiB)")
	f.StringVar(&dramCap, "dram-capacity", "", "yuebing's DRAM tier (default 2GiB)")
	f.StringVar(&ssdCap, "ssd-capacity", "", "yuebing's SSD tier (default 4GiB)")
	f.StringVar(&o.Dir, "dir", "", "directory for the SSD tier and redis-server (default: a temporary directory)")
	f.StringVar(&o.RedisServer, "redis-server", "", "redis-server program (default: from PATH)")
	f.StringVar(&o.RedisBenchmark, "redis-benchmark", "", "redis-benchmark program (default: from PATH)")
	return cmd
}
