package dram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/block"

	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/tiertest"
)

func newTestTier(t *testing.T, capacity int64) tier.Tier {
	d, err := New(Options{Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestConformance(t *testing.T) { tiertest.RunSuite(t, newTestTier) }

func TestArenaIsOffHeap(t *testing.T) {
	const capacity = 256 << 20
	d, err := New(Options{Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := make([]byte, 1<<20)
	for i := 0; i < capacity/len(v); i++ {
		if err := d.Put(t.Context(), tiertest.Key(i), v, tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 16<<20 {
		t.Fatalf("storing %d MiB grew the Go heap by %d MiB", capacity>>20, grew>>20)
	}
	if st := d.Stats(); st.Used > capacity || st.Blocks < capacity/(1<<20)-1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestEvictionBackPressure: while the evict handler holds its victims'
// pins, their space is not reused, so a put that needs it waits; releasing
// the pins lets it through, and a put whose context ends first fails.
func TestEvictionBackPressure(t *testing.T) {
	d, err := New(Options{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	held := make(chan *tier.Handle, 16)
	d.SetEvictHandler(func(_ context.Context, _ block.Key, _ tier.BlockInfo, h *tier.Handle) { held <- h })
	v := make([]byte, 256<<10)
	for i := range 4 {
		if err := d.Put(t.Context(), tiertest.Key(i), v, tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := d.Put(ctx, tiertest.Key(10), v, tier.PutOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put with victims held = %v, want the context's deadline", err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Put(t.Context(), tiertest.Key(11), v, tier.PutOptions{}) }()
	select {
	case err := <-done:
		t.Fatalf("put finished while its space was held: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	(<-held).Release()
	if err := <-done; err != nil {
		t.Fatalf("put after release: %v", err)
	}
	close(held)
	for h := range held {
		h.Release()
	}
}

func TestNoSpaceWhenAllPinned(t *testing.T) {
	d, err := New(Options{Capacity: 1 << 20, MaxPinnedFraction: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	v := make([]byte, 512<<10)
	for i := range 2 {
		k := tiertest.Key(i)
		if err := d.Put(t.Context(), k, v, tier.PutOptions{PinnedUntil: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Put(t.Context(), tiertest.Key(5), v, tier.PutOptions{}); !errors.Is(err, tier.ErrNoSpace) {
		t.Fatalf("put into a fully pinned tier = %v, want ErrNoSpace", err)
	}
}

func TestPinLimit(t *testing.T) {
	d, err := New(Options{Capacity: 1 << 20}) // soft pins may hold half
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	v := make([]byte, 300<<10)
	for i := range 2 {
		d.Put(t.Context(), tiertest.Key(i), v, tier.PutOptions{})
	}
	if err := d.Pin(tiertest.Key(0), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := d.Pin(tiertest.Key(1), time.Now().Add(time.Hour)); !errors.Is(err, tier.ErrNoSpace) {
		t.Fatalf("pin over the limit = %v, want ErrNoSpace", err)
	}
	if err := d.Pin(tiertest.Key(0), time.Now().Add(2*time.Hour)); err != nil {
		t.Fatalf("extending an existing pin: %v", err)
	}
}

func TestCloseWithOutstandingHandle(t *testing.T) {
	d, err := New(Options{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	k := tiertest.Key(1)
	v := tiertest.Value(k, 4096)
	d.Put(t.Context(), k, v, tier.PutOptions{})
	h, err := d.Get(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := d.Get(t.Context(), k); !errors.Is(err, tier.ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
	if err := d.Put(t.Context(), tiertest.Key(2), v, tier.PutOptions{}); !errors.Is(err, tier.ErrClosed) {
		t.Fatalf("Put after Close = %v", err)
	}
	// The arena stays mapped until the last handle goes.
	if !bytes.Equal(h.Bytes(), v) {
		t.Fatal("handle bytes changed after Close")
	}
	h.Release()
	if d.arena != nil {
		t.Fatal("arena still mapped after the last handle was released")
	}
}

func TestOptionsValidate(t *testing.T) {
	_, err := New(Options{Capacity: 10, Policy: "nope", MaxPinnedFraction: 2})
	for _, want := range []string{"Capacity", "Policy", "MaxPinnedFraction"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

// TestConformancePrefault: a tier stays correct with the arena populated
// before start and while it is populated in the background.
func TestConformancePrefault(t *testing.T) {
	for _, opts := range []Options{{Prefault: true}, {BackgroundPrefault: true}} {
		t.Run(fmt.Sprintf("prefault=%v,background=%v", opts.Prefault, opts.BackgroundPrefault), func(t *testing.T) {
			tiertest.RunSuite(t, func(t *testing.T, capacity int64) tier.Tier {
				o := opts
				o.Capacity = capacity
				d, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				return d
			})
		})
	}
}

// TestNoPrefaultByDefault: unless asked, nothing populates the arena: its
// pages are committed only as blocks are stored, so an idle node's
// resident memory does not grow to the tier's capacity.
func TestNoPrefaultByDefault(t *testing.T) {
	d, err := New(Options{Capacity: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	select {
	case <-d.prefaulted:
	default:
		t.Fatal("a background prefault runs although none was asked for")
	}
	if n := residentPages(t, d); n != 0 {
		t.Fatalf("%d arena pages resident before any put", n)
	}
}

func residentPages(t *testing.T, d *DRAM) int {
	t.Helper()
	vec := make([]byte, (len(d.arena)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&d.arena[0])), uintptr(len(d.arena)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

func TestConformanceEagerChecksum(t *testing.T) {
	tiertest.RunSuite(t, func(t *testing.T, capacity int64) tier.Tier {
		d, err := New(Options{Capacity: capacity, EagerChecksum: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	})
}

func TestChecksumModes(t *testing.T) {
	for _, eager := range []bool{false, true} {
		d, err := New(Options{Capacity: 1 << 20, EagerChecksum: eager})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		k := tiertest.Key(1)
		v := tiertest.Value(k, 5000)
		d.Put(t.Context(), k, v, tier.PutOptions{})
		info, _ := d.Stat(k)
		if info.HasChecksum != eager {
			t.Fatalf("eager=%v: checksum known at put = %v", eager, info.HasChecksum)
		}
		h, _ := d.Get(t.Context(), k)
		if h.Checksum() != block.Checksum(v) {
			t.Fatalf("eager=%v: handle checksum wrong", eager)
		}
		h.Release()
		// Computed once, kept for the block.
		if info, _ := d.Stat(k); !info.HasChecksum || info.Checksum != block.Checksum(v) {
			t.Fatalf("eager=%v: after a read, Stat = %+v", eager, info)
		}
		// A put that carries a checksum is verified even when lazy.
		k2 := tiertest.Key(2)
		bad := tier.PutOptions{Checksum: block.Checksum(v) ^ 1, HasChecksum: true}
		if err := d.Put(t.Context(), k2, v, bad); !errors.Is(err, tier.ErrChecksum) {
			t.Fatalf("eager=%v: wrong checksum accepted: %v", eager, err)
		}
	}
}

// TestBackgroundPrefault: asked for, the background prefault makes the
// arena resident without a single put (TestConformancePrefault checks a
// tier in use meanwhile stays correct).
func TestBackgroundPrefault(t *testing.T) {
	d, err := New(Options{Capacity: 64 << 20, BackgroundPrefault: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	select {
	case <-d.prefaulted:
	case <-time.After(time.Minute):
		t.Fatal("background prefault did not finish")
	}
	pages := (len(d.arena) + os.Getpagesize() - 1) / os.Getpagesize()
	if n := residentPages(t, d); n != pages {
		t.Fatalf("%d of %d arena pages are not resident after the prefault", pages-n, pages)
	}
}

func TestCloseStopsPrefault(t *testing.T) {
	d, err := New(Options{Capacity: 1 << 30, BackgroundPrefault: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.prefaulted:
	default:
		t.Fatal("Close returned before the prefault stopped")
	}
}

// TestReplaceWhileEvicting: a key put again while its old copy is still
// with the evict handler gets a new copy with a new version; the old
// copy's handle keeps its own bytes, and the tier serves only the new one.
func TestReplaceWhileEvicting(t *testing.T) {
	d, err := New(Options{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	k := tiertest.Key(1)
	old := bytes.Repeat([]byte{1}, 256<<10)
	type evicted struct {
		info tier.BlockInfo
		h    *tier.Handle
	}
	got := make(chan evicted, 8)
	release := make(chan struct{})
	d.SetEvictHandler(func(_ context.Context, key block.Key, info tier.BlockInfo, h *tier.Handle) {
		if key == k {
			got <- evicted{info, h}
			<-release // hold the old copy in its evicting state
			return
		}
		h.Release()
	})
	if err := d.Put(t.Context(), k, old, tier.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	oldInfo, _ := d.Stat(k)
	filled := make(chan error, 1)
	go func() { // fills the tier until k is chosen as a victim
		for i := 2; i < 6; i++ {
			if err := d.Put(t.Context(), tiertest.Key(i), make([]byte, 256<<10), tier.PutOptions{}); err != nil {
				filled <- err
				return
			}
		}
		filled <- nil
	}()
	ev := <-got
	if ev.info.Version != oldInfo.Version {
		t.Fatalf("evicted version %d, stored %d", ev.info.Version, oldInfo.Version)
	}
	fresh := bytes.Repeat([]byte{2}, 100<<10)
	if err := d.Put(t.Context(), k, fresh, tier.PutOptions{}); err != nil {
		t.Fatalf("put while the old copy is evicting: %v", err)
	}
	newInfo, err := d.Stat(k)
	if err != nil || newInfo.Version == oldInfo.Version || newInfo.Size != int64(len(fresh)) {
		t.Fatalf("after the replacing put: %+v, %v", newInfo, err)
	}
	close(release)
	if err := <-filled; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ev.h.Bytes(), old) {
		t.Fatal("the evicted copy's handle lost its bytes")
	}
	ev.h.Release()
	h, err := d.Get(t.Context(), k)
	if err != nil || !bytes.Equal(h.Bytes(), fresh) {
		t.Fatalf("after the hand-off, Get = %v", err)
	}
	h.Release()
}
