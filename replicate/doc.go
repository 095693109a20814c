// Package replicate decides where block replicas live: how hot each block is,
// which blocks get extra replicas and where, which replicas go when blocks
// cool down or a node runs short of memory, and how blocks that lost replicas
// to a dead node are repaired.
//
// The decisions are made by Core, a deterministic state machine in the manner
// of etcd-io/raft: events and the time go in (Step, Tick), copy and drop
// actions come out; it starts no goroutines and does no I/O, so tests and
// simulators drive it exactly. Driver runs a Core for real: it ticks it,
// executes its actions on an Executor (the cluster layer's, over the transfer
// service) and feeds the outcomes back.
//
//	g := index.NewGlobal(index.GlobalOptions{}) // the leader's block directory
//	c, err := replicate.NewCore(replicate.Options{}, g)
//	c.Step(now, replicate.NodeUp{Node: 1, Capacity: 64 << 30, Free: 32 << 30})
//	c.Step(now, replicate.SetReplicas{Key: k, Count: 2})
//	c.Step(now, replicate.Hits{Node: 3, Keys: []block.Key{k}})
//	for _, a := range c.Tick(now) {
//		// a.Kind is Copy (a.From -> a.Node) or Drop (at a.Node); run it,
//		// then report: c.Step(later, replicate.Done{ID: a.ID, Err: err})
//	}
//
// In short (docs/cluster.md has the model and its numbers): heat is hits in
// a sliding window, counted exactly only for blocks a count-min sketch finds
// above a floor, at most Options.MaxHot of them; a block wants
// max(desired count, heat step) replicas, one more per HotFactor times more
// heat, up to MaxReplicas; new replicas go first to nodes that fetch the block,
// then to the least loaded and emptiest; surplus replicas go after a cooldown,
// with hysteresis; nodes under pressure get drops of spare replicas, coldest
// first, never below a block's desired count; repairs go pinned blocks first,
// then by heat; and at most MaxInFlight actions (MaxInFlightPerNode copies per
// node) are out at once.
package replicate
