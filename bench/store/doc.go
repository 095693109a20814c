// Package store is `yuebing bench store`: the DRAM and SSD tiers' put and
// get throughput and the index's prefix match, in process, beside copy and
// read baselines.
package store
