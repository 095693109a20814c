package cluster

import (
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// BenchmarkReadFrom reads a prefix of 64 blocks of 64 KiB from another
// node in one round trip over the transfer service.
func BenchmarkReadFrom(b *testing.B) {
	c := newTestCluster(b, 2, func(o *Options) { o.Admit = AdmitNever })
	c.waitFormed()
	holder, reader := c.nodes[0], c.nodes[1]
	keys := make([]block.Key, 64)
	for i := range keys {
		keys[i] = testKey(i)
		if _, err := holder.store.Put(b.Context(), keys[i], value(i, 64<<10), tier.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []string{"transfer"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(64 * 64 << 10)
			for b.Loop() {
				out, err := reader.n.readFrom(b.Context(), holder.n.id, keys)
				if err != nil || out[len(out)-1] == nil {
					b.Fatal(err)
				}
				for _, r := range out {
					r.Handle.Release()
				}
			}
		})
	}
}
