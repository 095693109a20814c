package adapter_test

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/adapter/hbmsim"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/internal/servetest"
)

// Saves are stored by the node straight out of the connector's staging
// memory, and loads into registered memory are written by the node itself: into the
// pages of a device whose memory is a memfd (hbmsim, through PageTarget)
// and into a Staging of its own (NewRegionStaging), the KV lands equal to
// what was saved and not one byte goes through a staging segment. A
// target in plain memory still loads, through the segment, as before.
func TestLoadIntoRegisteredMemory(t *testing.T) {
	_, url := servetest.Serve(t)
	c := connector(t, url, nil)
	ctx := t.Context()
	toks := tokens(11, 5*16)
	store(t, c, toks)
	plan, err := c.Lookup(ctx, toks)
	if err != nil || plan.HitBlocks != 5 {
		t.Fatalf("lookup: %+v %v", plan, err)
	}
	want := computed(plan.Keys)
	hit := int64(plan.HitBlocks) * testLayout.BlockBytes()
	// The saves went straight out of the connector's save staging
	// memory: only the 24-byte commit records went through the segment.
	if s := c.Stats(); s.ShmRegionSaveRequests == 0 || s.ShmDirectBytes != hit || s.ShmStagedBytes != 24*int64(plan.HitBlocks) {
		t.Fatalf("saves: stats %+v; want %d bytes direct, %d staged", s, hit, 24*plan.HitBlocks)
	}

	dev, err := hbmsim.New(hbmsim.Options{PageBytes: int(testLayout.BlockBytes()), Pages: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pages, err := dev.Alloc(plan.HitBlocks + 2)
	if err != nil {
		t.Fatal(err)
	}
	// Not the first pages, and not in order: offsets in the region are
	// the device's, not the plan's.
	pages = pages[2:]
	pages[0], pages[3] = pages[3], pages[0]
	before := c.Stats()
	if res, err := c.Load(ctx, plan, adapter.PageTarget{Dev: dev, Pages: pages, Layout: testLayout}).Result(ctx); err != nil || res.Blocks != 5 {
		t.Fatalf("load into device pages: %+v %v", res, err)
	}
	got := make([]byte, testLayout.LayerBytes())
	for b := range plan.HitBlocks {
		for l := range testLayout.Layers {
			if err := dev.CopyOut(ctx, got, pages[b], l*int(testLayout.LayerBytes())); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Region(b, l)) {
				t.Fatalf("block %d layer %d in the device's page is not the saved KV", b, l)
			}
		}
	}
	s := c.Stats()
	if s.ShmRegionLoadRequests == before.ShmRegionLoadRequests || s.ShmStagedBytes != before.ShmStagedBytes || s.ShmDirectBytes-before.ShmDirectBytes != hit {
		t.Fatalf("load into registered pages: stats %+v, before %+v; want %d bytes direct, none staged", s, before, hit)
	}

	st, err := adapter.NewRegionStaging(testLayout, plan.HitBlocks)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Bytes is what a GPU page-locks: the whole staging memory, every
	// block's layers within it.
	mem := st.Bytes()
	if int64(len(mem)) != int64(plan.HitBlocks)*testLayout.BlockBytes() {
		t.Fatalf("staging Bytes: %d bytes for %d blocks of %d", len(mem), plan.HitBlocks, testLayout.BlockBytes())
	}
	lo, hi := uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&mem[len(mem)-1]))
	for b := range plan.HitBlocks {
		for l := range testLayout.Layers {
			r := st.Region(b, l)
			if p, q := uintptr(unsafe.Pointer(&r[0])), uintptr(unsafe.Pointer(&r[len(r)-1])); p < lo || q > hi {
				t.Fatalf("block %d layer %d lies outside the staging Bytes", b, l)
			}
		}
	}
	up, err := dev.Alloc(plan.HitBlocks)
	if err != nil {
		t.Fatal(err)
	}
	before = c.Stats()
	ld := c.Load(ctx, plan, st)
	for l := range testLayout.Layers {
		if n, err := st.Upload(ctx, ld, l, dev, up); err != nil || n != 5 {
			t.Fatalf("upload of layer %d: %d blocks, %v", l, n, err)
		}
		for b := range plan.HitBlocks {
			if !bytes.Equal(st.Region(b, l), want.Region(b, l)) {
				t.Fatalf("block %d layer %d in registered staging is not the saved KV", b, l)
			}
		}
	}
	s = c.Stats()
	if s.ShmStagedBytes != before.ShmStagedBytes || s.ShmDirectBytes-before.ShmDirectBytes != hit {
		t.Fatalf("load into registered staging: stats %+v, before %+v", s, before)
	}

	// A group gone missing on the node shortens the hit there, as on
	// every path: the blocks before it are good, nothing after counts.
	cl, _ := client.New(url, client.Options{})
	key, _ := testLayout.LayerAt(plan.Keys[3], 2)
	if err := cl.Delete(ctx, key, ns); err != nil {
		t.Fatal(err)
	}
	clear(dev.PageMemory(pages[0]))
	res, err := c.Load(ctx, plan, adapter.PageTarget{Dev: dev, Pages: pages, Layout: testLayout}).Result(ctx)
	if err != nil || res.Blocks != 3 || !errors.Is(res.Err, adapter.ErrShortLoad) {
		t.Fatalf("load with block 3 missing: %+v %v", res, err)
	}
	if !bytes.Equal(dev.PageMemory(pages[0])[:testLayout.LayerBytes()], want.Region(0, 0)) {
		t.Fatal("block 0 of a shortened load is not the saved KV")
	}

	// Plain memory: the segment, as before.
	before = c.Stats()
	p := newPool(plan.HitBlocks)
	if res, err := c.Load(ctx, plan, p).Result(ctx); err != nil || res.Blocks != 3 {
		t.Fatalf("load into plain memory: %+v %v", res, err)
	}
	for l := range testLayout.Layers {
		checkLayer(t, p, plan.Keys, l, 3)
	}
	if s := c.Stats(); s.ShmStagedBytes-before.ShmStagedBytes != 3*testLayout.BlockBytes() || s.ShmDirectBytes != before.ShmDirectBytes {
		t.Fatalf("load into plain memory: stats %+v, before %+v", s, before)
	}
}
