// Package shm is the rdma transport for a peer on the same host, such as an
// inference engine next to its cache node.
//
// Opening a segment connects to the owner's unix socket, authenticates with
// the cluster token, and receives the segment's memfd with SCM_RIGHTS; the
// initiator maps it and from then on moves bytes with plain copies, no
// system call per transfer. Only segments registered as rdma.SharedMemory
// can be opened this way. Before mapping a descriptor the initiator checks
// that it is a memory file at least as large as announced and sealed
// against shrinking, so a peer cannot truncate it and fault us later; the
// owner's SharedMemory is sealed the same way for the same reason.
//
//	tr, err := shm.New(shm.Options{Socket: "/run/yuebing/transfer.sock"})
//	e, err := rdma.New(rdma.Options{ClusterToken: token}, tr)
//	sm, err := rdma.NewSharedMemory("blocks", 1<<30)
//	e.RegisterShared("blocks", "cpu:0", sm)
//
// A mapping cannot be revoked: once a peer opened a segment it can read and
// write that memory until it closes the handle, even after the owner
// unregisters it. The pages live until the last mapping goes, so nobody
// faults, but an owner that must reclaim memory from an untrusted peer
// should use the tcp transport.
package shm
