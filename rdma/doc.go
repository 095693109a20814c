// Package rdma is yuebing's transfer service: it moves KV-cache blocks
// between the memory of cluster nodes, with the contract of Mooncake's
// Transfer Engine.
//
// A node registers local memory as named segments (a byte slice, or
// SharedMemory that a same-host peer can map), each with a location tag
// such as "cpu:0". A peer opens a remote segment by address and name, then
// allocates a batch, submits READ and WRITE requests (local segment and
// offset, remote segment and offset, length), polls each request's or the
// whole batch's status, waits, and frees the batch. Every range is checked
// against the registered segments on both sides: a request can only ever
// touch registered memory. Peers authenticate with a cluster token.
//
//	tr, _ := tcp.New(tcp.Options{Topology: topo})
//	e, _ := rdma.New(rdma.Options{ClusterToken: token}, tr)
//	local, _ := e.Register("staging", "cpu:0", buf)
//	remote, _ := e.OpenSegment(ctx, "10.0.0.7:7070", "blocks")
//	b, _ := e.AllocateBatch(2)
//	b.Submit(ctx,
//		rdma.Request{Op: rdma.Read, Local: local, Remote: remote, RemoteOffset: off, Length: n},
//		rdma.Request{Op: rdma.Write, Local: local, LocalOffset: n, Remote: remote, RemoteOffset: off2, Length: n})
//	st, _ := b.Wait(ctx) // st.State: completed, failed or timeout
//	b.Free()
//
// The bytes move through a Transport: rdma/tcp (sliced over several paths
// with failover, the default) or rdma/shm (same host, plain copies through
// a shared memfd). A verbs transport fits behind the "rdma" build tag on
// hardware that has it; rdma/rdmatest is the conformance suite each
// transport passes. The design, the wire format and the measurements are in
// docs/transfer.md and docs/benchmarks.md.
//
// The package and its sub-packages import only block from this module,
// plus golang.org/x/sys/unix for memfd, sealing and descriptor passing.
// Shared memory makes the package Linux-only.
package rdma
