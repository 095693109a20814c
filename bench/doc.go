// Package bench is the core shared by the `yuebing bench` harnesses, one
// package each under bench/: trace reading and replay, the report format,
// plots, progress bars, temporary directories and the child processes that
// the process-level harnesses run. It imports no harness.
//
// A benchmark fills a Report with one flat Row per measured case. Rows that
// have a same-run baseline carry "baseline", "baseline_<unit>" and "ratio"
// (the row's figure over the baseline's; higher is better). The report prints
// as a human table or, for --json, as exactly one JSON object:
//
//	{"results":[{"name":"dram_get","gbps":11.2,"baseline":"copy","baseline_gbps":12.0,"ratio":0.93}]}
//
// Progress bars go to stderr so stdout stays machine-readable. Nothing but
// the harnesses and cmd/yuebing imports these packages; they may import
// anything.
//
// Trace replay: ReadTrace and LoadTrace read the Mooncake request traces,
// OpenTrace prepares one for replay, and Replay runs it through a
// ReplayCache under the paper's prefix-hit model (docs/policies.md).
//
//	t, err := bench.OpenTrace("conversation_trace.jsonl")
//	res := bench.Replay(t, cache)
package bench
