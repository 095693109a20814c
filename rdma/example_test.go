package rdma_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/tcp"
)

// A cache node registers memory; an inference engine opens it and reads a
// block with a one-request batch.
func Example() {
	ctx := context.Background()
	newEngine := func(nic string) *rdma.Engine {
		tr, err := tcp.New(tcp.Options{Topology: rdma.Topology{rdma.AnyLocation: {Preferred: []string{nic}}}})
		if err != nil {
			panic(err)
		}
		e, err := rdma.New(rdma.Options{ClusterToken: "example-cluster-token"}, tr)
		if err != nil {
			panic(err)
		}
		return e
	}
	cache := newEngine("127.0.0.1:0")
	defer cache.Close()
	kv := bytes.Repeat([]byte("kv"), 1<<20)
	if _, err := cache.Register("blocks", "cpu:0", kv); err != nil {
		panic(err)
	}

	engine := newEngine("127.0.0.1:0")
	defer engine.Close()
	buf := make([]byte, 1<<20)
	local, _ := engine.Register("staging", "cpu:0", buf)
	remote, err := engine.OpenSegment(ctx, cache.Addr(), "blocks")
	if err != nil {
		panic(err)
	}
	batch, _ := engine.AllocateBatch(1)
	batch.Submit(ctx, rdma.Request{Op: rdma.Read, Local: local, Remote: remote, RemoteOffset: 4096, Length: 1 << 20})
	st, _ := batch.Wait(ctx)
	batch.Free()
	fmt.Println(st.State, st.Transferred, bytes.Equal(buf, kv[4096:4096+1<<20]))
	// Output: completed 1048576 true
}
