package adapter_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/adapter/hbmsim"
	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/internal/servetest"
	"github.com/yuebing/yuebing/rdma"
)

// BenchmarkLoad measures loading a cached prefix of 16 blocks of the sim-70b
// layout (80 layers in 3 groups, 512 tokens, 640 KiB a block) from a real
// node on the same host, through shared memory (the default) and over HTTP,
// against reading the same bytes stored as whole blocks in one multi-get
// (HTTP, and through a shared-memory session), and against the other way to
// address a layer alone: a ranged GET per layer of a whole-block object.
// Allocations per op show that block bytes are never copied through the
// heap.
func BenchmarkLoad(b *testing.B) {
	// In a cluster of one, so that its transfer service serves reads by
	// key: the path of an engine on another host.
	const token = "adapter-bench-cluster-token"
	tokFile := filepath.Join(b.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(token), 0o600); err != nil {
		b.Fatal(err)
	}
	proc, url := servetest.Serve(b, "--dram-capacity", "512MiB", "--ssd-capacity", "1GiB",
		"--transfer-listen", "127.0.0.1:0", "--cluster", "adapterbench", "--node-name", "a",
		"--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0", "--cluster-token-file", tokFile)
	xfer := transferEngine(b, token)
	for _, tc := range []struct {
		preset        string
		tokens, count int
	}{{"sim-70b", 512, 16}, {"qwen2-7b", 256, 4}, {"llama-3-8b", 256, 2}} {
		layout, _ := adapter.Preset(tc.preset, tc.tokens)
		b.Run(fmt.Sprintf("%s-%dKiB", tc.preset, layout.LayerBytes()>>10), func(b *testing.B) {
			benchLoad(b, url, layout, tc.count, xfer, proc.Banner["transfer"])
		})
	}
}

func benchLoad(b *testing.B, url string, layout adapter.Layout, blocks int, xfer *rdma.Engine, xferAddr string) {
	cl, err := client.New(url, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	c, err := adapter.New(adapter.Options{Client: cl, Namespace: ns, Layout: layout})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(b.Context())
	ctx := b.Context()
	toks := make([]uint32, blocks*layout.BlockTokens)
	for i := range toks {
		toks[i] = uint32(i + layout.Layers<<20)
	}
	plan, _ := c.Lookup(ctx, toks)
	src := &pool{layout: layout, mem: make([]byte, int64(blocks)*layout.BlockBytes())}
	for i, k := range plan.Keys {
		for l := range layout.Layers {
			fill(src.Region(i, l), k, l)
		}
	}
	sv := c.Save(plan)
	for l := range layout.Layers {
		sv.Layer(l, src)
	}
	c.Flush(ctx)
	if plan, _ = c.Lookup(ctx, toks); plan.HitBlocks != blocks {
		b.Fatalf("stored %d of %d blocks", plan.HitBlocks, blocks)
	}
	// The same bytes as whole-block objects, for the baseline.
	whole := make([]block.Key, blocks)
	for i := range whole {
		whole[i] = block.OpaqueKey(ns, fmt.Appendf(nil, "%s/%d", layout.Name, i))
		if _, err := cl.Put(ctx, ns, whole[i], src.mem[int64(i)*layout.BlockBytes():int64(i+1)*layout.BlockBytes()]); err != nil {
			b.Fatal(err)
		}
	}
	dst := &pool{layout: layout, mem: make([]byte, len(src.mem))}
	total := int64(len(src.mem))
	// The node writes what was just stored down to SSD in the background;
	// the first sub-benchmark would pay for it.
	time.Sleep(3 * time.Second)

	// loads times Loads of the plan on the connector above, or, with mod,
	// on one whose options mod changes; check looks at its counters after.
	loads := func(name string, mod func(*adapter.Options), check func(adapter.Stats) bool) {
		b.Run(name, func(b *testing.B) {
			lc := c
			if mod != nil {
				o := adapter.Options{Client: cl, Namespace: ns, Layout: layout}
				mod(&o)
				var err error
				if lc, err = adapter.New(o); err != nil {
					b.Fatal(err)
				}
				defer lc.Close(ctx)
			}
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				res, _ := lc.Load(ctx, plan, dst).Result(ctx)
				if res.Blocks != blocks {
					b.Fatal(res.Err)
				}
			}
			if check != nil && !check(lc.Stats()) {
				b.Fatalf("%s: stats %+v", name, lc.Stats())
			}
		})
	}
	loads("adapter", nil, func(s adapter.Stats) bool { return s.ShmLoadRequests > 0 && s.ShmStagedBytes > 0 })
	// The same load into device pages the node maps (hbmsim's memfd): the
	// node writes them itself, nothing goes through the segment.
	b.Run("adapter-registered", func(b *testing.B) {
		dev, err := hbmsim.New(hbmsim.Options{PageBytes: int(layout.BlockBytes()), Pages: blocks})
		if err != nil {
			b.Fatal(err)
		}
		defer dev.Close()
		pages, err := dev.Alloc(blocks)
		if err != nil {
			b.Fatal(err)
		}
		tgt := adapter.PageTarget{Dev: dev, Pages: pages, Layout: layout}
		// An engine registers its pool once: the node's first mapping of
		// the device's memory (its page tables) is not a load's cost.
		for range 4 {
			c.Load(ctx, plan, tgt).Result(ctx)
		}
		before := c.Stats()
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			res, _ := c.Load(ctx, plan, tgt).Result(ctx)
			if res.Blocks != blocks {
				b.Fatal(res.Err)
			}
		}
		if s := c.Stats(); s.ShmRegionLoadRequests == before.ShmRegionLoadRequests || s.ShmStagedBytes != before.ShmStagedBytes {
			b.Fatalf("adapter-registered: stats %+v, before %+v", s, before)
		}
	})
	loads("adapter-http", func(o *adapter.Options) { o.DisableShm = true }, nil)
	loads("adapter-transfer", func(o *adapter.Options) { o.DisableShm, o.Transfer, o.TransferAddr = true, xfer, xferAddr },
		func(s adapter.Stats) bool { return s.TransferLoadRequests > 0 && s.TransferFallbacks == 0 })
	loads("adapter-group-per-request", func(o *adapter.Options) { o.LoadRequestBytes = 1 }, nil)
	b.Run("whole-blocks-baseline", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			i := 0
			err := cl.GetBatch(ctx, ns, whole, func(f client.Frame, r io.Reader) error {
				off := int64(i) * layout.BlockBytes()
				i++
				_, err := io.ReadFull(r, dst.mem[off:off+f.Length])
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole-blocks-shm-baseline", func(b *testing.B) {
		st, err := cl.OpenStaging(ctx, total+int64(blocks)<<12)
		if err != nil {
			b.Skip("no shared memory:", err)
		}
		defer st.Close()
		sizes := make([]int64, blocks)
		for i := range sizes {
			sizes[i] = layout.BlockBytes()
		}
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			i := 0
			err := st.GetBatch(ctx, ns, whole, sizes, func(f client.Frame, r io.Reader) error {
				off := int64(i) * layout.BlockBytes()
				i++
				_, err := io.ReadFull(r, dst.mem[off:off+f.Length])
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ranged-get-per-layer", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		lb := layout.LayerBytes()
		for b.Loop() {
			for l := range layout.Layers {
				for i := range blocks {
					r, err := cl.Open(ctx, whole[i], client.GetOptions{Offset: int64(l) * lb, Length: lb})
					if err != nil {
						b.Fatal(err)
					}
					_, err = io.ReadFull(r, dst.Region(i, l))
					r.Close()
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
}
