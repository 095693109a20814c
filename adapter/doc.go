// Package adapter is the engine side of yuebing: what an inference engine
// calls to reuse KV cache held by the cluster instead of recomputing it.
//
// One Connector serves one engine process. Lookup finds the longest cached
// prefix of a prompt (the local node first, then the cluster query) and
// starts warming blocks found on SSD into DRAM; Load moves that prefix into
// the engine's registered KV memory layer by layer, signalling each layer as
// it lands so the engine computes layer l while later layers still arrive
// (Mooncake's layer-wise prefill, FAST'25 section 5); Save pushes each layer
// of the newly computed blocks through a bounded asynchronous queue as the
// prefill finishes it and commits a block once all its layers are stored.
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
// A block's value is stored as one sub-object per layer plus a small commit
// record under the block's chained key (docs/adapter.md says why, with the
// measurement). Failures never hand the engine wrong KV: every layer is
// checked against its CRC-32C and its length, and a layer that cannot be read
// shortens the hit, so the engine recomputes the rest.
//
// The Device interface is the contract an HBM tier needs (allocate pages,
// copy host<->device, register for transfer, free). adapter/hbmsim is its
// host-memory simulator; a CUDA implementation fits behind the "cuda" build
// tag on a machine with a GPU, as a verbs transport fits behind "rdma".
//
// The package imports client, rdma and block of this module, never server.
package adapter
