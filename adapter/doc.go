// Package adapter is the engine side of yuebing: what an inference engine
// calls to reuse KV cache held by the cluster instead of recomputing it.
//
// One Connector serves one engine process. Lookup finds the longest cached
// prefix of a prompt (the local node first, then the cluster query) and
// starts warming blocks found on SSD into DRAM; Load moves that prefix into
// the engine's registered KV memory a group of layers at a time, signalling
// each layer as its group lands so the engine computes the first layers while
// later groups still arrive (Mooncake's layer-wise prefill, FAST'25 section
// 5); Save stages each layer of the newly computed blocks as the prefill
// finishes it, pushes each complete group through a bounded asynchronous
// queue, and commits a block once all its groups are stored. With a node on
// the same host, bytes move through a shared-memory session (client.Staging)
// instead of HTTP.
//
//	c, _ := adapter.New(adapter.Options{Client: cl, Namespace: "acme/llama-3-8b", Layout: layout})
//	plan, _ := c.Lookup(ctx, tokens)
//	ld := c.Load(ctx, plan, pool)            // pool maps (block, layer) to registered memory
//	sv := c.Save(plan)
//	for l := range layout.Layers {
//		n, _ := ld.Wait(ctx, l)              // blocks of layer l that are valid
//		computeLayer(l, n)                   // the engine's own work
//		sv.Layer(l, pool)                    // never blocks; dropped and counted when full
//	}
//
// A block's value is stored as one sub-object per group of layers
// (Layout.GroupLayers, about 256 KiB by default) plus a small commit record
// under the block's chained key (docs/adapter.md says why, with the
// measurement); one layer alone is a ranged read of its group
// (Layout.LayerAt). Failures never hand the engine wrong KV: every group is
// checked against its CRC-32C and its length, and a group that cannot be read
// shortens the hit, so the engine recomputes the rest.
//
// The Device interface is the contract an HBM tier needs (allocate pages,
// copy host<->device, register for transfer, free). adapter/hbmsim is its
// host-memory simulator; a CUDA implementation fits behind the "cuda" build
// tag on a machine with a GPU, as a verbs transport fits behind "rdma".
//
// The package imports client, rdma and block of this module, never server.
package adapter
