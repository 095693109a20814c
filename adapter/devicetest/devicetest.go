package devicetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/yuebing/yuebing/adapter"
)

// Open makes a fresh device of pages pages of pageBytes each; the suite
// closes nothing, so Open registers its own cleanup with t.
type Open func(t *testing.T, pageBytes, pages int) adapter.Device

// Run runs every check against devices made by open.
func Run(t *testing.T, open Open) {
	t.Run("Shape", func(t *testing.T) { shape(t, open) })
	t.Run("AllocFree", func(t *testing.T) { allocFree(t, open) })
	t.Run("Copies", func(t *testing.T) { copies(t, open) })
	t.Run("Ranges", func(t *testing.T) { ranges(t, open) })
	t.Run("Concurrent", func(t *testing.T) { concurrent(t, open) })
	t.Run("Batch", func(t *testing.T) { batch(t, open) })
}

// batch checks adapter.BatchCopier, for devices that have it.
func batch(t *testing.T, open Open) {
	ctx := context.Background()
	const pb = 16 << 10
	d := open(t, pb, 4)
	bc, ok := d.(adapter.BatchCopier)
	if !ok {
		t.Skipf("%s copies one span at a time", d.Name())
	}
	pages, err := d.Alloc(3)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 3*pb)
	pattern(want, 42)
	var spans []adapter.Span
	for i, p := range pages {
		// Two halves per page, the second queued first.
		page := want[i*pb : (i+1)*pb]
		spans = append(spans, adapter.Span{Page: p, Off: pb / 2, Src: page[pb/2:]}, adapter.Span{Page: p, Off: 0, Src: page[:pb/2]})
	}
	spans = append(spans, adapter.Span{Page: pages[0], Off: 0, Src: nil})
	if err := bc.CopyInBatch(ctx, spans); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, pb)
	for i, p := range pages {
		if err := d.CopyOut(ctx, got, p, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[i*pb:(i+1)*pb]) {
			t.Fatalf("page %d: batch copy read back differs", p)
		}
	}
	free := adapter.Page(3)
	if err := bc.CopyInBatch(ctx, []adapter.Span{{Page: pages[0], Src: got}, {Page: free, Src: got}}); err == nil {
		t.Error("a batch with a span into a free page did not fail")
	}
	if err := bc.CopyInBatch(ctx, []adapter.Span{{Page: pages[0], Off: 1, Src: got}}); err == nil {
		t.Error("a batch with a span past the page did not fail")
	}
	if err := bc.CopyInBatch(ctx, nil); err != nil {
		t.Errorf("an empty batch: %v", err)
	}
}

// pattern fills b with bytes that differ by page, offset and seed, so a copy
// to the wrong place or of stale bytes shows.
func pattern(b []byte, seed int) {
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

func shape(t *testing.T, open Open) {
	d := open(t, 8192, 6)
	if d.PageBytes() != 8192 || d.Pages() != 6 || d.Name() == "" {
		t.Fatalf("shape: %q %d pages of %d", d.Name(), d.Pages(), d.PageBytes())
	}
}

func allocFree(t *testing.T, open Open) {
	d := open(t, 4096, 4)
	a, err := d.Alloc(3)
	if err != nil || len(a) != 3 {
		t.Fatalf("Alloc(3) = %v, %v", a, err)
	}
	if _, err := d.Alloc(2); !errors.Is(err, adapter.ErrDeviceFull) {
		t.Fatalf("allocating past the end: %v, want ErrDeviceFull", err)
	}
	// A failed Alloc takes nothing: the one free page is still there.
	one, err := d.Alloc(1)
	if err != nil {
		t.Fatalf("the free page after a failed Alloc: %v", err)
	}
	d.Free(one...)
	d.Free(a[1])
	b, err := d.Alloc(2)
	if err != nil {
		t.Fatalf("Alloc(2) after Free: %v", err)
	}
	seen := map[adapter.Page]bool{}
	for _, p := range append([]adapter.Page{a[0], a[2]}, b...) {
		if seen[p] || p < 0 || int(p) >= d.Pages() {
			t.Fatalf("page %d handed out twice or out of range", p)
		}
		seen[p] = true
	}
	if _, err := d.Alloc(-1); err == nil {
		t.Error("Alloc(-1) did not fail")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("freeing a free page did not panic")
			}
		}()
		d.Free(b[0])
		d.Free(b[0])
	}()
}

func copies(t *testing.T, open Open) {
	ctx := context.Background()
	const pb = 64 << 10
	d := open(t, pb, 4)
	pages, err := d.Alloc(4)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]byte, len(pages))
	for i, p := range pages {
		want[i] = make([]byte, pb)
		pattern(want[i], int(p)+1)
		// Write each page in pieces at odd offsets, as layers land.
		for off := 0; off < pb; off += 12345 {
			end := min(off+12345, pb)
			if err := d.CopyIn(ctx, p, off, want[i][off:end]); err != nil {
				t.Fatalf("CopyIn page %d at %d: %v", p, off, err)
			}
		}
	}
	for i, p := range pages {
		got := make([]byte, pb)
		if err := d.CopyOut(ctx, got, p, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[i]) {
			t.Fatalf("page %d: read back differs", p)
		}
		part := make([]byte, 1000)
		if err := d.CopyOut(ctx, part, p, pb-1000); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(part, want[i][pb-1000:]) {
			t.Fatalf("page %d: tail read back differs", p)
		}
	}
	// Empty copies at the page's end are no-ops, not errors.
	if err := d.CopyIn(ctx, pages[0], pb, nil); err != nil {
		t.Errorf("empty CopyIn at the end: %v", err)
	}
}

func ranges(t *testing.T, open Open) {
	ctx := context.Background()
	d := open(t, 4096, 2)
	pages, err := d.Alloc(1)
	if err != nil {
		t.Fatal(err)
	}
	p := pages[0]
	free := adapter.Page(1 - int(p))
	buf := make([]byte, 16)
	for _, c := range []struct {
		name string
		p    adapter.Page
		off  int
		n    int
	}{
		{"past the page", p, 4090, 16},
		{"negative offset", p, -1, 16},
		{"offset past the page", p, 4097, 0},
		{"negative page", -1, 0, 16},
		{"page past the device", 2, 0, 16},
		{"a free page", free, 0, 16},
	} {
		if err := d.CopyIn(ctx, c.p, c.off, buf[:c.n]); err == nil {
			t.Errorf("CopyIn %s: no error", c.name)
		}
		if err := d.CopyOut(ctx, buf[:c.n], c.p, c.off); err == nil {
			t.Errorf("CopyOut %s: no error", c.name)
		}
	}
}

func concurrent(t *testing.T, open Open) {
	ctx := context.Background()
	const pb, workers, rounds = 32 << 10, 4, 20
	d := open(t, pb, workers*2)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := make([]byte, pb)
			got := make([]byte, pb)
			for r := range rounds {
				pages, err := d.Alloc(2)
				if err != nil {
					errs <- err
					return
				}
				for i, p := range pages {
					pattern(src, w*1000+r*10+i)
					if err := d.CopyIn(ctx, p, 0, src); err != nil {
						errs <- err
						return
					}
					if err := d.CopyOut(ctx, got, p, 0); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, src) {
						errs <- fmt.Errorf("worker %d round %d page %d: read back differs", w, r, p)
						return
					}
				}
				d.Free(pages...)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
