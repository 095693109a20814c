// Package bench holds yuebing's workloads and measurements: load generators,
// trace replay and the report format shared by every `yuebing bench` command.
//
// A benchmark fills a Report with one flat Row per measured case. Rows that
// have a same-run baseline carry "baseline", "baseline_<unit>" and "ratio"
// (the row's figure over the baseline's; higher is better). The report prints
// as a human table or, for --json, as exactly one JSON object:
//
//	{"results":[{"name":"dram_get","gbps":11.2,"baseline":"copy","baseline_gbps":12.0,"ratio":0.93}]}
//
// Progress bars go to stderr so stdout stays machine-readable. Nothing imports
// this package; it may import anything.
//
// Trace replay: ReadTrace and LoadTrace read the Mooncake request traces,
// OpenTrace prepares one for replay, and Replay runs it through a
// ReplayCache under the paper's prefix-hit model. Hitrate sweeps policies and
// capacities against the unbounded and Belady bounds, Pool compares local
// caches with a global pool. docs/policies.md describes the model.
//
// Scheduling simulation: Sched replays a trace through a simulated
// prefill/decode cluster driven by the conductor's scheduling core (package
// scheduler); SchedSuite and SchedReport run and report the default
// comparison of placement and overload policies (docs/benchmarks.md).
//
//	t, err := bench.OpenTrace("conversation_trace.jsonl")
//	cells, err := bench.Hitrate(ctx, bench.HitrateOptions{Traces: []*bench.Trace{t}})
//	bench.HitrateReport(cells).Write(os.Stdout, false)
package bench
