package server

import (
	"io"
	"testing"

	"github.com/yuebing/yuebing/client"
)

// BenchmarkGet reads a 1 MiB block through the API and the client over
// loopback; `yuebing bench http` compares the same path with raw TCP.
func BenchmarkGet(b *testing.B) {
	n := startNode(b, nodeOpts{})
	c := n.client(b, "")
	keys := chain(b, nsAlpha, 1, 11)
	data := payload(1, 1<<20)
	if _, err := c.Put(b.Context(), nsAlpha, keys[0], data); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, len(data))
		for pb.Next() {
			r, err := c.Open(b.Context(), keys[0], client.GetOptions{})
			if err != nil {
				b.Error(err)
				return
			}
			io.ReadFull(r, buf)
			r.Close()
		}
	})
}
