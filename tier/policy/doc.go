// Package policy holds cache eviction policies: given the blocks a cache
// holds and how they are used, which one goes next.
//
// A Policy only orders keys; it holds no values and does no I/O. The tier that
// owns it serializes calls (policies are not safe for concurrent use), tells it
// about inserts, hits and removals, and asks it for a victim when it needs room:
//
//	p := policy.NewLRU[block.Key]()
//	p.Add(k, policy.Info[block.Key]{Size: 1 << 20})
//	p.Access(k)
//	victim, ok := p.Evict(func(k block.Key) bool { return !pinned(k) })
//
// The same policies drive the DRAM tier and the trace simulator of
// `yuebing bench hitrate`, so a policy's hit rate on a trace is the hit rate
// the tier gets. Sizes are in whatever unit the owner uses (bytes in a tier,
// blocks in the simulator); policies that size internal queues (S3-FIFO, ARC)
// take their capacity in that unit. Classed stacks one policy per class
// (the DRAM tier's retention classes) and evicts from the lowest class
// first.
package policy
