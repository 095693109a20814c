// Package hitrate is `yuebing bench hitrate`: Mooncake traces replayed
// through simulated caches of each eviction policy and capacity, against the
// unbounded cache and Belady's offline MIN, reporting the prefix hit rate and
// the prefill compute it saves; with --through-tier the same replay runs
// through a real DRAM tier (TierCache). docs/policies.md describes the model.
//
//	cells, err := hitrate.Run(ctx, hitrate.Options{Traces: []*bench.Trace{t}})
//	hitrate.Report(cells).Write(os.Stdout, false)
package hitrate
