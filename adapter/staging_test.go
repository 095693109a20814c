package adapter_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/adapter/hbmsim"
	"github.com/yuebing/yuebing/internal/servetest"
)

// TestStagingUpload loads through host staging and uploads layer by layer
// into device pages, as an engine on a GPU without GPUDirect does; the
// device here is the simulator, copied to with CopyIn as a GPU would be.
func TestStagingUpload(t *testing.T) {
	_, url := servetest.Serve(t)
	c := connector(t, url, nil)
	ctx := t.Context()
	toks := tokens(7, 6*16)
	store(t, c, toks)
	plan, err := c.Lookup(ctx, toks)
	if err != nil || plan.HitBlocks != 6 {
		t.Fatalf("lookup: %+v %v", plan, err)
	}

	if _, err := adapter.NewStaging(testLayout, 6, make([]byte, 5*testLayout.BlockBytes())); !errors.Is(err, adapter.ErrInvalid) {
		t.Fatalf("staging too small: %v", err)
	}
	st, err := adapter.NewStaging(testLayout, 6, make([]byte, 6*testLayout.BlockBytes()))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := hbmsim.New(hbmsim.Options{PageBytes: int(testLayout.BlockBytes()), Pages: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pages, err := dev.Alloc(6)
	if err != nil {
		t.Fatal(err)
	}
	ld := c.Load(ctx, plan, st)
	want := computed(plan.Keys)
	got := make([]byte, testLayout.LayerBytes())
	for l := range testLayout.Layers {
		n, err := st.Upload(ctx, ld, l, dev, pages)
		if err != nil || n != 6 {
			t.Fatalf("layer %d: %d blocks uploaded, %v", l, n, err)
		}
		// Layer l is on the device now, whatever later layers are doing.
		for b := range n {
			if err := dev.CopyOut(ctx, got, pages[b], l*int(testLayout.LayerBytes())); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Region(b, l)) {
				t.Fatalf("block %d layer %d on the device is not the saved KV", b, l)
			}
		}
	}

	// A device page list shorter than the hit is refused, not overrun.
	ld = c.Load(ctx, plan, st)
	if _, err := st.Upload(ctx, ld, 0, dev, pages[:2]); !errors.Is(err, adapter.ErrInvalid) {
		t.Fatalf("upload into too few pages: %v", err)
	}
	if _, err := ld.Result(ctx); err != nil {
		t.Fatal(err)
	}

	// Saving from device pages (PageSource) stores what the device holds.
	other := tokens(8, 3*16)
	oplan, err := c.Lookup(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	src := computed(oplan.Keys)
	opages, err := dev.Alloc(2)
	if err != nil {
		t.Fatal(err)
	}
	opages = append(opages, pages[0])
	for b := range oplan.Keys {
		for l := range testLayout.Layers {
			if err := dev.CopyIn(ctx, opages[b], l*int(testLayout.LayerBytes()), src.Region(b, l)); err != nil {
				t.Fatal(err)
			}
		}
	}
	sv := c.Save(oplan)
	for l := range testLayout.Layers {
		if !sv.LayerWait(ctx, l, adapter.PageSource{Dev: dev, Pages: opages, Layout: testLayout}) {
			t.Fatalf("layer %d not queued", l)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	back := newPool(3)
	oplan, _ = c.Lookup(ctx, other)
	if res, err := c.Load(ctx, oplan, back).Result(ctx); err != nil || res.Blocks != 3 {
		t.Fatalf("reading back the device's save: %+v %v", res, err)
	}
	for l := range testLayout.Layers {
		checkLayer(t, back, oplan.Keys, l, 3)
	}
}
