// Package scheduler is the conductor: it places each inference request on a
// prefill instance and a decode instance, KV-cache-aware, and rejects early
// what cannot meet its service level objectives (Mooncake, FAST'25,
// section 4 and Algorithm 1).
//
// The decision logic is a deterministic Core, as in etcd-io/raft: it holds
// the registered instances, the blocks each holds, the prefill work queued
// on each and the decode batches, and every method takes the current time
// as an argument and returns decisions; it starts no goroutines and does no
// I/O. The simulator (yuebing bench sched) drives a Core directly; the
// Driver wraps one with a mutex and a clock for the HTTP API (in package
// server, which decodes requests with this package's Decode functions), and
// hands pull plans to a Migrator.
//
// Estimates: prefill time is a polynomial in input length and cached
// prefix, fitted by least squares to a profile CSV (the default profile is
// generated from the paper's FLOPs model for LLaMA3-70B on 8 x A800, see
// DefaultMFU); queue time is the sum of the estimates queued on an
// instance; transfer time is KV bytes over bandwidth; decode TBT is linear
// in batch size and KV tokens. docs/conductor.md describes the model, the
// overload policies and the HTTP API.
//
//	c, _ := scheduler.NewCore(scheduler.Options{Rejection: scheduler.RejectPredicted})
//	c.AddInstance(scheduler.Instance{ID: "p0", Role: scheduler.RolePrefill}, 0)
//	c.AddInstance(scheduler.Instance{ID: "d0", Role: scheduler.RoleDecode}, 0)
//	c.UpdateBlocks("p0", scheduler.BlockUpdate{Added: keys[:10]})
//	d, _ := c.Schedule(scheduler.Request{Keys: keys, OutputTokens: 300}, now)
//	if !d.Accepted() { /* 429: d.Rejected, d.Estimates */ }
//
// The package imports block and index; the replication layer satisfies its
// Migrator.
package scheduler
