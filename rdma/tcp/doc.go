// Package tcp is the rdma transport over TCP: the default, and the one that
// works between hosts.
//
// Each node names its NICs per memory location in an rdma.Topology; a NIC
// is a "host:port" the transport listens on and binds outgoing connections
// to. A path is one connection from a local NIC to a remote NIC; opening a
// segment tells the initiator which remote NICs serve it. A request is cut
// into slices (Options.SliceSize) spread round robin over the preferred
// paths, and over the secondary ones only while no preferred path is up.
// A slice whose path breaks is resubmitted on another; the path is marked
// down with a doubling backoff and probed again afterwards. A transfer
// fails only when no path is left or its deadline passes.
//
// Connections are made on demand and pooled, one per path, at most
// Options.MaxEndpoints of them, evicting by SIEVE. Slices are pipelined on a
// connection (Options.Depth). Data moves without intermediate buffers: a
// receiver reads the header, checks the range against registered memory,
// then reads the payload straight into it; a sender writes header and
// payload with writev. Every slice carries a CRC-32C.
//
//	tr, err := tcp.New(tcp.Options{
//		Topology: rdma.Topology{"cpu:0": {
//			Preferred: []string{"10.0.0.1:7070", "10.0.1.1:7070"},
//			Secondary: []string{"10.0.2.1:7070"},
//		}},
//		SliceSize: 1 << 20,
//	})
//	e, err := rdma.New(rdma.Options{ClusterToken: token}, tr)
//
// The frame format is in rdma/wire; docs/transfer.md has the whole design.
package tcp
