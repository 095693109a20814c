// Package rdmatest is the conformance suite for rdma transports. Every
// transport runs it from its own tests:
//
//	func TestSuite(t *testing.T) {
//		rdmatest.RunSuite(t, func(t testing.TB) rdma.Transport {
//			tr, err := tcp.New(tcp.Options{...})
//			if err != nil { t.Fatal(err) }
//			return tr
//		})
//	}
//
// The suite builds real engines on real transports (a "server" that
// registers shared-memory segments, a "client" that opens them) and checks
// the contract: bytes arrive intact for random ranges in both directions,
// many batches run at once, ranges outside registered memory are refused,
// batches report and free as documented, deadlines and closing end
// transfers instead of hanging them, and peers without the cluster token
// are turned away.
package rdmatest
