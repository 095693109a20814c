package shm

import (
	"path/filepath"
	"testing"

	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/rdmatest"
)

func newTransport(t testing.TB) *Transport {
	t.Helper()
	tr, err := New(Options{Socket: filepath.Join(t.TempDir(), "t.sock")})
	if err != nil {
		t.Fatalf("shm.New: %v", err)
	}
	return tr
}

func TestSuite(t *testing.T) {
	rdmatest.RunSuite(t, func(t testing.TB) rdma.Transport { return newTransport(t) })
}
