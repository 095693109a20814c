//go:build cuda && linux && cgo

package hbmcuda_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/adapter/devicetest"
	"github.com/yuebing/yuebing/adapter/hbmcuda"
	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/internal/servetest"
)

func open(t testing.TB, pageBytes, pages int) *hbmcuda.Device {
	t.Helper()
	d, err := hbmcuda.New(hbmcuda.Options{PageBytes: pageBytes, Pages: pages})
	if errors.Is(err, hbmcuda.ErrNoDriver) {
		t.Skipf("no GPU here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

func TestConformance(t *testing.T) {
	devicetest.Run(t, func(t *testing.T, pageBytes, pages int) adapter.Device {
		return open(t, pageBytes, pages)
	})
}

func TestRegisterUnsupported(t *testing.T) {
	d := open(t, 4096, 1)
	t.Logf("%s is %s", d.Name(), d.Model())
	if _, err := d.Register(nil, "hbm"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Register: %v, want ErrUnsupported", err)
	}
}

// layout is Llama-3-8B's KV shape with 16-token blocks: 2 MiB a block,
// 64 KiB a layer.
var layout = func() adapter.Layout {
	l, err := adapter.Preset("llama-3-8b", 16)
	if err != nil {
		panic(err)
	}
	return l
}()

// fill writes the deterministic KV of layer l of the block keyed k.
func fill(dst []byte, k block.Key, l int) {
	x := binary.LittleEndian.Uint64(k[:8]) ^ uint64(l+1)*0x9e3779b97f4a7c15
	for i := 0; i+8 <= len(dst); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(dst[i:], x)
	}
}

// hostKV is a Source holding the true KV of keys in host memory.
type hostKV struct{ keys []block.Key }

func (h hostKV) CopyLayer(blk, l int, dst []byte) error {
	fill(dst, h.keys[blk], l)
	return nil
}

func prompt(seed, blocks int) []uint32 {
	t := make([]uint32, blocks*layout.BlockTokens)
	for i := range t {
		t[i] = uint32(seed*100003 + i)
	}
	return t
}

func connector(t testing.TB, url string) *adapter.Connector {
	t.Helper()
	cl, err := client.New(url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := adapter.New(adapter.Options{Client: cl, Namespace: "acme/llama-3-8b", Layout: layout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

// save stores every block of toks from src and waits for it to land.
func save(t testing.TB, c *adapter.Connector, toks []uint32, src func(adapter.Plan) adapter.Source) adapter.Plan {
	t.Helper()
	ctx := context.Background()
	plan, err := c.Lookup(ctx, toks)
	if err != nil {
		t.Fatal(err)
	}
	sv := c.Save(plan)
	s := src(plan)
	for l := range layout.Layers {
		if !sv.LayerWait(ctx, l, s) {
			t.Fatalf("layer %d not queued", l)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return plan
}

// loadToHBM loads toks' cached prefix into fresh device pages through
// pinned staging, layer by layer, and returns the pages.
func loadToHBM(t testing.TB, c *adapter.Connector, d *hbmcuda.Device, st *adapter.Staging, toks []uint32) (adapter.Plan, []adapter.Page) {
	t.Helper()
	ctx := context.Background()
	plan, err := c.Lookup(ctx, toks)
	if err != nil {
		t.Fatal(err)
	}
	pages, err := d.Alloc(plan.HitBlocks)
	if err != nil {
		t.Fatal(err)
	}
	ld := c.Load(ctx, plan, st)
	for l := range layout.Layers {
		n, err := st.Upload(ctx, ld, l, d, pages)
		if err != nil || n != plan.HitBlocks {
			t.Fatalf("layer %d: %d of %d blocks uploaded: %v", l, n, plan.HitBlocks, err)
		}
	}
	return plan, pages
}

// checkHBM reads every layer of the plan's blocks back out of their
// device pages and compares it with the KV that was saved.
func checkHBM(t *testing.T, d *hbmcuda.Device, plan adapter.Plan, pages []adapter.Page) {
	t.Helper()
	got := make([]byte, layout.LayerBytes())
	want := make([]byte, layout.LayerBytes())
	for b, p := range pages {
		for l := range layout.Layers {
			if err := d.CopyOut(context.Background(), got, p, l*int(layout.LayerBytes())); err != nil {
				t.Fatal(err)
			}
			fill(want, plan.Keys[b], l)
			if !bytes.Equal(got, want) {
				t.Fatalf("block %d layer %d in HBM is not the saved KV", b, l)
			}
		}
	}
}

func TestLoadIntoHBM(t *testing.T) {
	const blocks = 16
	d := open(t, int(layout.BlockBytes()), blocks)
	_, url := servetest.Serve(t, "--dram-capacity", "512MiB")
	c := connector(t, url)
	toks := prompt(1, blocks)
	save(t, c, toks, func(p adapter.Plan) adapter.Source { return hostKV{p.Keys} })

	pinned, err := d.HostAlloc(blocks * int(layout.BlockBytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	st, err := adapter.NewStaging(layout, blocks, pinned.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	plan, pages := loadToHBM(t, c, d, st, toks)
	if plan.HitBlocks != blocks {
		t.Fatalf("hit %d of %d blocks", plan.HitBlocks, blocks)
	}
	checkHBM(t, d, plan, pages)
}

// TestLoadIntoRegisteredHBM loads through staging memory the node writes
// itself (NewRegionStaging), page-locked for the GPU by HostRegister: the
// KV reaches HBM equal to what was saved, and no byte of it went through
// a staging segment.
func TestLoadIntoRegisteredHBM(t *testing.T) {
	const blocks = 16
	d := open(t, int(layout.BlockBytes()), blocks)
	_, url := servetest.Serve(t, "--dram-capacity", "512MiB")
	c := connector(t, url)
	toks := prompt(3, blocks)
	save(t, c, toks, func(p adapter.Plan) adapter.Source { return hostKV{p.Keys} })

	st, err := adapter.NewRegionStaging(layout, blocks)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := d.HostRegister(nil); !errors.Is(err, adapter.ErrInvalid) {
		t.Fatalf("HostRegister of nothing: %v, want ErrInvalid", err)
	}
	reg, err := d.HostRegister(st.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := reg.Close(); err != nil {
			t.Error(err)
		}
	}()
	before := c.Stats()
	plan, pages := loadToHBM(t, c, d, st, toks)
	if plan.HitBlocks != blocks {
		t.Fatalf("hit %d of %d blocks", plan.HitBlocks, blocks)
	}
	s := c.Stats()
	if hit := int64(blocks) * layout.BlockBytes(); s.ShmDirectBytes-before.ShmDirectBytes != hit || s.ShmStagedBytes != before.ShmStagedBytes {
		t.Fatalf("stats %+v, before %+v: want %d bytes written by the node into the registered staging, none staged", s, before, hit)
	}
	checkHBM(t, d, plan, pages)
}

// TestSaveFromHBM saves KV that lives only in device memory (a prefill's
// output) and reads it back through the store into host memory.
func TestSaveFromHBM(t *testing.T) {
	const blocks = 8
	d := open(t, int(layout.BlockBytes()), blocks)
	_, url := servetest.Serve(t, "--dram-capacity", "512MiB")
	c := connector(t, url)
	toks := prompt(2, blocks)
	var pages []adapter.Page
	plan := save(t, c, toks, func(p adapter.Plan) adapter.Source {
		var err error
		if pages, err = d.Alloc(len(p.Keys)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, layout.LayerBytes())
		for b := range p.Keys {
			for l := range layout.Layers {
				fill(buf, p.Keys[b], l)
				if err := d.CopyIn(context.Background(), pages[b], l*int(layout.LayerBytes()), buf); err != nil {
					t.Fatal(err)
				}
			}
		}
		return adapter.PageSource{Dev: d, Pages: pages, Layout: layout}
	})
	again, err := c.Lookup(context.Background(), toks)
	if err != nil || again.HitBlocks != blocks {
		t.Fatalf("lookup after the save: %d of %d blocks: %v", again.HitBlocks, blocks, err)
	}
	st, err := adapter.NewStaging(layout, blocks, make([]byte, blocks*layout.BlockBytes()))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Load(context.Background(), again, st).Result(context.Background())
	if err != nil || res.Blocks != blocks || res.Err != nil {
		t.Fatalf("load: %+v %v", res, err)
	}
	want := make([]byte, layout.LayerBytes())
	for b := range blocks {
		for l := range layout.Layers {
			fill(want, plan.Keys[b], l)
			if !bytes.Equal(st.Region(b, l), want) {
				t.Fatalf("block %d layer %d: saved from HBM, read back different", b, l)
			}
		}
	}
}

// BenchmarkLoadIntoHBM loads a cached 16-block (32 MiB) prefix into HBM
// through pinned staging, and measures in the same run the two copies it is
// made of: the adapter's Load into host memory alone, and a host-to-device
// copy of the same bytes from pinned memory.
func BenchmarkLoadIntoHBM(b *testing.B) {
	const blocks = 16
	d := open(b, int(layout.BlockBytes()), 2*blocks)
	_, url := servetest.Serve(b, "--dram-capacity", "1GiB")
	c := connector(b, url)
	toks := prompt(3, blocks)
	save(b, c, toks, func(p adapter.Plan) adapter.Source { return hostKV{p.Keys} })
	bytesPer := int64(blocks) * layout.BlockBytes()
	pinned, err := d.HostAlloc(int(bytesPer))
	if err != nil {
		b.Fatal(err)
	}
	defer pinned.Close()
	st, err := adapter.NewStaging(layout, blocks, pinned.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	plan, err := c.Lookup(ctx, toks)
	if err != nil || plan.HitBlocks != blocks {
		b.Fatalf("lookup: %d blocks, %v", plan.HitBlocks, err)
	}
	pages, err := d.Alloc(blocks)
	if err != nil {
		b.Fatal(err)
	}
	gbps := func(n int, dt time.Duration) float64 { return float64(int64(n)*bytesPer) / dt.Seconds() / 1e9 }

	b.Run("hbm", func(b *testing.B) {
		b.SetBytes(bytesPer)
		for b.Loop() {
			ld := c.Load(ctx, plan, st)
			for l := range layout.Layers {
				if n, err := st.Upload(ctx, ld, l, d, pages); err != nil || n != blocks {
					b.Fatalf("layer %d: %d blocks, %v", l, n, err)
				}
			}
		}
	})
	// The node writes the blocks into staging memory of the engine's
	// own, page-locked by HostRegister: the node's copy and the upload.
	rst, err := adapter.NewRegionStaging(layout, blocks)
	if err != nil {
		b.Fatal(err)
	}
	defer rst.Close()
	reg, err := d.HostRegister(rst.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	b.Run("hbm-registered", func(b *testing.B) {
		b.SetBytes(bytesPer)
		for b.Loop() {
			ld := c.Load(ctx, plan, rst)
			for l := range layout.Layers {
				if n, err := rst.Upload(ctx, ld, l, d, pages); err != nil || n != blocks {
					b.Fatalf("layer %d: %d blocks, %v", l, n, err)
				}
			}
		}
	})
	b.Run("host", func(b *testing.B) {
		b.SetBytes(bytesPer)
		for b.Loop() {
			if res, err := c.Load(ctx, plan, st).Result(ctx); err != nil || res.Blocks != blocks {
				b.Fatalf("load: %+v %v", res, err)
			}
		}
	})
	b.Run("htod-pinned", func(b *testing.B) {
		b.SetBytes(bytesPer)
		start := time.Now()
		for b.Loop() {
			for i, p := range pages {
				if err := d.CopyIn(ctx, p, 0, pinned.Bytes()[int64(i)*layout.BlockBytes():int64(i+1)*layout.BlockBytes()]); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(gbps(b.N, time.Since(start)), "GB/s")
	})
	b.Run("htod-pageable", func(b *testing.B) {
		host := make([]byte, layout.BlockBytes())
		b.SetBytes(bytesPer)
		for b.Loop() {
			for _, p := range pages {
				if err := d.CopyIn(ctx, p, 0, host); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
