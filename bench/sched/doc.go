// Package sched is `yuebing bench sched`: a trace replayed through a
// simulated prefill/decode cluster driven by the conductor's scheduling core
// (package scheduler). Suite and Report run and report the default
// comparison of placement and overload policies (docs/benchmarks.md).
package sched
