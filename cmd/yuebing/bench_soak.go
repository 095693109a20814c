package main

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/yuebing/yuebing/bench/soak"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench"
)

func newBenchSoakCmd() *cobra.Command {
	var (
		o                      soak.Options
		dram, ssd, inflight    string
		minValue, maxValue     string
		plot, binary           string
		asJSON, noKill, noDura bool
		engines                int
		s3f                    soak.S3Flags
	)
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Run real nodes past capacity under mixed load with kill -9 and restarts; check every read",
		Long: `Start this binary as "yuebing serve" (one node, or with --cluster three, the
first with an embedded etcd) on small tiers, and drive it for --duration with
HTTP block and object puts and gets, RESP SET/GET and batch puts and gets over a
working set --overcommit times the nodes' DRAM+SSD capacity, so eviction runs
throughout. Every --kill-every a node is killed with SIGKILL and restarted on
its data (in a cluster one that neither hosts etcd nor leads, in turn).

Beside the nodes, --engines (2) engine simulators ("yuebing engine-sim")
publish vLLM KV events to a router ("yuebing conductor" with engines), and
--router-workers goroutines send OpenAI completions and chats, streamed and
not, on a few shared prefixes through it. Every --engine-kill-every (default
--kill-every, the first half of it in) an engine is killed with SIGKILL and
restarted on its addresses; it must then serve a request through the router
again within --restart-for. No answer may be a 5xx other than a 503 while an
engine is out, or a cut or malformed answer with every engine up, and the
router's process must never end.

Every value describes itself (slot, version, checksum): a read that returns
other bytes than the value asked for, or for a rewritten RESP key an older
version than the one acknowledged with no restart between, is a corrupt
read. Every --durable-every a block larger than the DRAM tier is put; the node
acknowledges it only after it is synced on SSD. After a kill, the dead node's
segment files are scanned for those records, and each one on disk must read
back after the restart, or it is a lost write.

With --s3 the soak runs the cluster (unless --cluster=false) and each node gets
an S3 tier under its SSD (the s3 section: blocks the SSD evicts go to the
bucket and reads that miss above come from it), all on one bucket of a
versitygw the soak runs on 127.0.0.1 over a directory of its own, with random
credentials, each node under its own namespace. Nodes and engines are killed
as above; at --s3-kill-at the S3 server is killed with SIGKILL and restarted
--s3-down-for later: every node's tier must report itself degraded, clients
must see no errors while it is with every node up (reads of blocks held only
in the bucket are misses), and every tier must report healthy again.
--s3-endpoint and --s3-bucket use an external bucket instead (credentials from
--s3-credentials-file or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, never
logged): the nodes write and delete objects only under --s3-namespace, and
the soak never kills the server, creates or empties the bucket, or removes
what the nodes left there.

Rows: "soak" (requests, errors by kind, corrupt_reads, lost_writes,
max_rss_bytes against rss_bound_bytes = dram + max in-flight bytes + pebble
index + 1 GiB, ...), "soak_node" per node and, with --json, "soak_window" per
--window (p99 latencies); with an S3 tier the soak row has s3_* figures
(demoted blocks, hits, degraded seconds and nodes, client errors during the
outage).
Exits non-zero when a read was corrupt, a write was lost, a node went over its
memory bound, the router failed as above, or the S3 tier failed as above. See
docs/benchmarks.md ("Soak").`,
		Example: `  yuebing bench soak --duration 10m --plot soak.png
  yuebing bench soak --duration 10m --cluster --json --plot soak-cluster.png
  yuebing bench soak --duration 4m --s3 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Binary = binary
			if o.Binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("soak: finding this binary: %w", err)
				}
				o.Binary = exe
			}
			o.Log = cmd.ErrOrStderr()
			sf := soak.Flags{Options: o, DRAMCapacity: dram, SSDCapacity: ssd, MaxInflightBytes: inflight,
				MinValue: minValue, MaxValue: maxValue, NoKill: noKill, NoDurable: noDura, Engines: engines, S3: s3f,
				ClusterSet: cmd.Flags().Changed("cluster")}
			so, err := sf.Parse()
			if err != nil {
				return usageError{err}
			}
			stop := timeProgress("soak", cmp.Or(so.Duration, 10*time.Minute))
			res, err := soak.Run(cmd.Context(), so)
			stop()
			if err != nil {
				return err
			}
			if plot != "" {
				if err := soak.Plot(res, plot); err != nil {
					return err
				}
			}
			r := soak.Report(res)
			if !asJSON {
				r = soakTable(r)
			}
			if err := r.Write(cmd.OutOrStdout(), asJSON); err != nil {
				return err
			}
			if res.Failed() {
				router := ""
				if rt := res.Router; rt != nil && rt.Failed() {
					router = fmt.Sprintf(", router: %d 5xx other than 503, %d 503s with every engine up, %d cut or bad answers, %d engines not serving after a restart, exited %v",
						rt.Bad5xx, rt.Outside503, rt.BadAnswers, rt.Unrecovered, rt.RouterExited)
				}
				s3 := ""
				if r := res.S3; r != nil && r.Failed() {
					s3 = fmt.Sprintf(", s3: %d client errors during the outage, %d corrupt blocks, %d kills, degraded seen by %d of %d nodes (%d idle), recovered %v",
						r.OutageErrors, r.Corrupt, r.Kills, r.DegradedNodes, r.Nodes, len(r.IdleNodes), r.Recovered)
				}
				return fmt.Errorf("soak failed: %d corrupt reads, %d lost writes, RSS %d of bound %d%s%s (data and logs kept in %s)",
					res.CorruptReads, res.LostWrites, res.MaxRSS, res.RSSBound, router, s3, res.Dir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.Duration, "duration", 10*time.Minute, "how long the load runs")
	f.BoolVar(&o.Cluster, "cluster", false, "three nodes (embedded etcd on the first) instead of one")
	f.DurationVar(&o.KillEvery, "kill-every", 60*time.Second, "time between kill -9s of a node")
	f.BoolVar(&noKill, "no-kill", false, "never kill a node or an engine")
	f.StringVar(&dram, "dram-capacity", "64MiB", "DRAM tier of each node")
	f.StringVar(&ssd, "ssd-capacity", "256MiB", "SSD tier of each node")
	f.StringVar(&inflight, "max-inflight-bytes", "256MiB", "limits.max_inflight_bytes of each node (part of the RSS bound)")
	f.Float64Var(&o.Overcommit, "overcommit", 3, "written working set over the nodes' DRAM+SSD capacity")
	f.StringVar(&minValue, "min-value", "4KiB", "smallest value")
	f.StringVar(&maxValue, "max-value", "256KiB", "largest value")
	f.IntVar(&o.Workers, "workers", 1, "load goroutines per front end (HTTP blocks, HTTP objects, RESP, batches)")
	f.IntVar(&o.BatchSize, "batch", 8, "blocks per batch put or get")
	f.DurationVar(&o.DurableEvery, "durable-every", 5*time.Second, "time between durable puts (a block larger than the DRAM tier, acknowledged from SSD)")
	f.BoolVar(&noDura, "no-durable", false, "no durable puts (and so no lost-write check)")
	f.DurationVar(&o.Window, "window", 10*time.Second, "latency window")
	f.DurationVar(&o.RestartFor, "restart-for", 60*time.Second, "how long a restart is retried")
	f.StringVar(&o.Dir, "dir", "", "directory for the nodes' data and logs (default: a temporary one, removed unless the soak fails)")
	f.BoolVar(&o.Keep, "keep", false, "keep the temporary directory")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the load")
	f.IntVar(&engines, "engines", 2, "engine simulators behind a router, with OpenAI traffic through it (0: none)")
	f.DurationVar(&o.EngineKillEvery, "engine-kill-every", 0, "time between kill -9s of an engine (default --kill-every)")
	f.IntVar(&o.RouterWorkers, "router-workers", 2, "goroutines sending OpenAI requests through the router")
	f.BoolVar(&s3f.Local, "s3", false, "give each node an S3 tier under its SSD, on a versitygw run on 127.0.0.1 over a directory of the soak's, killed once mid-run and restarted (runs the cluster unless --cluster=false)")
	f.StringVar(&s3f.Versitygw, "versitygw", "", "versitygw binary for --s3 (default: on PATH or in $(go env GOPATH)/bin)")
	f.StringVar(&s3f.Endpoint, "s3-endpoint", "", "an external S3 endpoint (host:port, or an http(s):// URL) for the nodes' S3 tier instead of --s3; never killed (runs the cluster unless --cluster=false)")
	f.StringVar(&s3f.Bucket, "s3-bucket", "", "the external bucket (it must exist)")
	f.StringVar(&s3f.Namespace, "s3-namespace", "", "object name prefix; each node adds /<node> (default yuebing-soak/<start time>)")
	f.StringVar(&s3f.CredentialsFile, "s3-credentials-file", "", "YAML with access_key_id and secret_access_key for --s3-endpoint (default: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY); never logged")
	f.StringVar(&s3f.Capacity, "s3-capacity", "", "S3 tier of each node (default 4 x (DRAM + SSD))")
	f.StringVar(&s3f.SegmentSize, "s3-segment-size", "", "s3.segment_size of each node (default 4MiB)")
	f.DurationVar(&s3f.KillAt, "s3-kill-at", 0, "when to kill -9 the --s3 server (default 2/5 of --duration)")
	f.DurationVar(&s3f.DownFor, "s3-down-for", 0, "how long the --s3 server stays down (default min(15s, --duration/5))")
	f.BoolVar(&s3f.NoKill, "no-s3-kill", false, "never kill the --s3 server")
	f.StringVar(&binary, "binary", "", "yuebing binary to run as the node (default: this one)")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"results":[...]} instead of a table`)
	f.StringVar(&plot, "plot", "", "also draw p99 latency and RSS per window, with the kills, to this PNG file")
	return cmd
}

// soakTable is the verdict as a two-column table, a figure by name, then a
// row per node; the per-window rows are for --json and --plot. A long value
// (a map of counts) wraps onto rows of its own so the table fits
// bench.TableWidth.
func soakTable(r *bench.Report) *bench.Report {
	var figs [][2]string
	for _, row := range r.Results {
		switch row["name"] {
		case "soak":
			for _, k := range []string{"passed", "duration_s", "nodes", "kills", "requests", "hits", "misses", "errors", "errors_by_op", "errors_outside_restarts",
				"corrupt_reads", "stale_after_restart", "durable_acked", "durable_checked", "lost_writes",
				"max_rss_bytes", "rss_bound_bytes", "p99_get_ms", "p99_put_ms", "max_downtime_s", "restart_retries",
				"working_set_bytes", "put_bytes",
				"engines", "router_requests", "router_status", "router_by_kind", "router_served_by",
				"router_prefix_hits", "router_prefix_tokens", "router_prompt_tokens", "router_metrics",
				"engine_kills", "engine_restart_retries", "engine_recovered", "engine_recovered_with_hits", "engine_max_recovery_s",
				"router_5xx_not_503", "router_503_outside_outage", "router_bad_answers", "engine_unrecovered", "router_exited",
				"s3_demoted_blocks", "s3_hits", "s3_dropped_demotions", "s3_request_errors", "s3_corrupt", "s3_kills", "s3_outage_s",
				"s3_degraded_seen", "s3_nodes", "s3_degraded_nodes", "s3_not_degraded", "s3_degraded_s", "s3_recovered", "s3_recovery_s", "s3_recoveries", "s3_outage_errors",
				"node_log", "corrupt_examples", "lost_examples", "router_faults"} {
				if v, ok := row[k]; ok {
					figs = append(figs, [2]string{k, bench.FormatCell(k, v)})
				}
			}
		case "soak_node":
			figs = append(figs, [2]string{fmt.Sprintf("node %v rss / bound", row["node"]), fmt.Sprintf("%s / %s (%v starts)",
				bench.FormatCell("max_rss_bytes", row["max_rss_bytes"]), bench.FormatCell("rss_bound_bytes", row["rss_bound_bytes"]), row["starts"])})
		}
	}
	nameWidth := len("name")
	for _, f := range figs {
		nameWidth = max(nameWidth, len(f[0]))
	}
	out := &bench.Report{Columns: []string{"name", "value"}, Human: map[string][]string{"": {"value"}}}
	for _, f := range figs {
		for i, part := range wrapText(f[1], bench.TableWidth-nameWidth-2) {
			name := f[0]
			if i > 0 {
				name = ""
			}
			out.Add(bench.Row{"name": name, "value": part})
		}
	}
	return out
}

// wrapText cuts s into lines of at most width runes, at spaces where it can.
func wrapText(s string, width int) []string {
	width = max(width, 20)
	var lines []string
	for r := []rune(s); ; {
		if len(r) <= width {
			return append(lines, string(r))
		}
		cut := width
		for i := width; i > width/2; i-- {
			if r[i] == ' ' {
				cut = i
				break
			}
		}
		lines = append(lines, strings.TrimRight(string(r[:cut]), " "))
		r = []rune(strings.TrimLeft(string(r[cut:]), " "))
	}
}

// timeProgress draws a bar over a run of fixed length d, one tick a second,
// until stop is called.
func timeProgress(label string, d time.Duration) (stop func()) {
	p := bench.NewProgress(label+" (s)", int64(d/time.Second))
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.Add(1)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		p.Done()
	}
}
