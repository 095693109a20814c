package main

import (
	"runtime"

	"github.com/yuebing/yuebing/bench/resp"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench"
)

func newBenchRespCmd() *cobra.Command {
	var (
		fl     resp.Flags
		asJSON bool
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
--flow-clients connections, ops_per_sec in chunks per second; resp (op
memory), --memory-keys 28-byte keys loaded into a fresh node whose DRAM tier
is --memory-dram and into a fresh redis-server, with bytes_per_key (the
node's live heap growth per key), redis_bytes_per_key (redis-server's
used_memory growth per key) and fits (every key kept within the DRAM
tier). Each other row has op, ops_per_sec, mb_per_sec, baseline
(redis-server), baseline_ops_per_sec and ratio, and each server's CPU time per request (cpu_us_per_op,
baseline_cpu_us_per_op, cpu_ratio; the tests of one redis-benchmark run share
it; lmcache_flow has none, its client runs in this process). Every case but
the flow is also a row named resp, with its op, value_bytes, clients,
pipeline, ratio, cpu_ratio and row (the named row's name). On a machine
with few cores, --pin keeps the client and the servers on separate CPUs.
Needs redis-server and redis-benchmark (Debian packages redis-server and
redis-tools).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := fl.Parse()
			if err != nil {
				return usageError{err}
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
	o := &fl.Options
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	f.BoolVar(&o.Quick, "quick", false, "a tenth of the requests, one run per case")
	f.StringVar(&fl.Sizes, "sizes", "", "value sizes, comma-separated (default 4096,1MiB,4MiB)")
	f.IntVar(&o.Clients, "clients", 0, "redis-benchmark connections, -c (default 8)")
	f.IntVar(&o.Pipeline, "pipeline", 0, "-P of the extra run at the smallest size (default 16; 1: none)")
	f.IntVar(&o.Threads, "threads", 0, "redis-benchmark --threads (default: one thread)")
	f.BoolVar(&o.Pin, "pin", false, "run redis-benchmark on CPU 0 and the servers on the other CPUs (needs taskset)")
	f.BoolVar(&o.EventLoop, "event-loop", runtime.GOOS == "linux", "serve yuebing's connections from its event loops, as yuebing serve does by default on Linux (resp.event_loop); --event-loop=false: a goroutine each")
	f.IntVar(&o.RedisIOThreads, "redis-io-threads", 0, "redis-server's --io-threads, pinned or not (default 1)")
	f.StringVar(&fl.FlowChunk, "flow-chunk", "", "lmcache_flow's chunk size (default 32MiB: 256 tokens of a 32-layer model with 8 KV heads of 128, fp16, as Mistral-7B or Llama-3-8B; 256KiB with --quick)")
	f.IntVar(&o.FlowClients, "flow-clients", 0, "lmcache_flow's connections (default 32)")
	f.BoolVar(&o.NoFlow, "no-flow", false, "leave out the lmcache_flow row")
	f.BoolVar(&o.NoSmall, "no-small", false, "leave out the small-value rows")
	f.IntVar(&o.MemoryKeys, "memory-keys", 0, "keys of the memory row (default 10000000; 200000 with --quick)")
	f.StringVar(&fl.MemoryDRAM, "memory-dram", "", "the memory row's DRAM tier, all of it open to inline values (default: --dram-capacity)")
	f.BoolVar(&o.NoMemory, "no-memory", false, "leave out the memory row")
	f.IntVar(&o.Repeat, "repeat", 0, "runs per case and server; the median is reported (default 3)")
	f.StringVar(&fl.Bytes, "bytes", "", "bytes per run: requests = bytes/size within [200, 100000] (default 2GiB)")
	f.StringVar(&fl.DRAMCapacity, "dram-capacity", "", "yuebing's DRAM tier (default 2GiB)")
	f.StringVar(&fl.SSDCapacity, "ssd-capacity", "", "yuebing's SSD tier (default 4GiB)")
	f.StringVar(&o.Dir, "dir", "", "directory for the SSD tier and redis-server (default: a temporary directory)")
	f.StringVar(&o.RedisServer, "redis-server", "", "redis-server program (default: from PATH)")
	f.StringVar(&o.RedisBenchmark, "redis-benchmark", "", "redis-benchmark program (default: from PATH)")
	return cmd
}
