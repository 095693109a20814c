package tcp

import (
	"io"
	"log/slog"
	"strconv"
	"testing"

	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/rdmatest"
)

func newTransport(t testing.TB, opts Options) *Transport {
	t.Helper()
	tr, err := New(opts)
	if err != nil {
		t.Fatalf("tcp.New: %v", err)
	}
	return tr
}

// loopbackTopology gives every engine n NICs of its own on 127.0.0.x,
// which all route on Linux loopback without configuration.
func loopbackTopology(first, n int) rdma.Topology {
	nics := make([]string, n)
	for i := range nics {
		nics[i] = "127.0.0." + strconv.Itoa(first+i) + ":0"
	}
	return rdma.Topology{rdma.AnyLocation: {Preferred: nics}}
}

func TestSuite(t *testing.T) {
	rdmatest.RunSuite(t, func(t testing.TB) rdma.Transport {
		// Small slices, so the suite's requests are cut into many.
		return newTransport(t, Options{Topology: loopbackTopology(1, 2), SliceSize: 16 << 10})
	})
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
