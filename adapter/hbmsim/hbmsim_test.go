package hbmsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/shm"
)

func TestAllocFree(t *testing.T) {
	d, err := New(Options{PageBytes: 4096, Pages: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, err := d.Alloc(3)
	if err != nil || len(a) != 3 {
		t.Fatal(a, err)
	}
	if _, err := d.Alloc(2); !errors.Is(err, adapter.ErrDeviceFull) {
		t.Fatalf("over-allocation: %v", err)
	}
	if d.FreePages() != 1 {
		t.Fatalf("a failed alloc took pages: %d free", d.FreePages())
	}
	d.Free(a[1])
	b, err := d.Alloc(2)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[adapter.Page]bool{}
	for _, p := range append([]adapter.Page{a[0], a[2]}, b...) {
		if seen[p] {
			t.Fatalf("page %d handed out twice", p)
		}
		seen[p] = true
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("double free did not panic")
			}
		}()
		d.Free(a[1])
		d.Free(a[1])
	}()
	for _, o := range []Options{{PageBytes: 0, Pages: 1}, {PageBytes: 1, Pages: -1}, {PageBytes: 1 << 30, Pages: 1 << 20}} {
		if _, err := New(o); !errors.Is(err, adapter.ErrInvalid) {
			t.Errorf("New(%+v): %v", o, err)
		}
	}
}

func TestCopies(t *testing.T) {
	ctx := context.Background()
	d, _ := New(Options{PageBytes: 1024, Pages: 2})
	defer d.Close()
	p, _ := d.Alloc(1)
	src := bytes.Repeat([]byte("kv"), 100)
	if err := d.CopyIn(ctx, p[0], 24, src); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 200)
	if err := d.CopyOut(ctx, out, p[0], 24); err != nil || !bytes.Equal(out, src) {
		t.Fatalf("copy out: %v", err)
	}
	if !bytes.Equal(d.PageMemory(p[0])[24:224], src) {
		t.Fatal("page memory does not show the copy")
	}
	f := func(pg adapter.Page, off, n int) {
		t.Helper()
		if err := d.CopyIn(ctx, pg, off, make([]byte, n)); !errors.Is(err, ErrRange) {
			t.Errorf("CopyIn(page %d, %d, %d): %v", pg, off, n, err)
		}
		if err := d.CopyOut(ctx, make([]byte, n), pg, off); !errors.Is(err, ErrRange) {
			t.Errorf("CopyOut(page %d, %d, %d): %v", pg, off, n, err)
		}
	}
	f(p[0], 1000, 25)
	f(p[0], -1, 1)
	f(p[0], 1025, 0)
	f(5, 0, 1)
	f(1-p[0], 0, 1) // the other page, never allocated
}

// A same-host peer maps the registered device and reads a page over the
// shared-memory transport, as a NIC reads registered HBM.
func TestRegisterShared(t *testing.T) {
	ctx := context.Background()
	d, _ := New(Options{PageBytes: 4096, Pages: 8})
	defer d.Close()
	sock := fmt.Sprintf("@hbmsim-test-%d", os.Getpid())
	owner := engine(t, sock)
	if _, err := d.Register(owner, "hbm"); err != nil {
		t.Fatal(err)
	}
	pages, _ := d.Alloc(3)
	want := bytes.Repeat([]byte{7, 1}, 2048)
	d.CopyIn(ctx, pages[2], 0, want)

	peer := engine(t, sock+"-peer")
	buf := make([]byte, 4096)
	local, _ := peer.Register("buf", "cpu:0", buf)
	remote, err := peer.OpenSegment(ctx, owner.Addr(), "hbm")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := peer.AllocateBatch(1)
	b.Submit(ctx, rdma.Request{Op: rdma.Read, Local: local, Remote: remote, RemoteOffset: d.Offset(pages[2]), Length: 4096})
	st, err := b.Wait(ctx)
	b.Free()
	if err != nil || st.State != rdma.Completed || !bytes.Equal(buf, want) {
		t.Fatalf("peer read %v %v", st.State, err)
	}
}

func engine(t *testing.T, sock string) *rdma.Engine {
	t.Helper()
	tr, err := shm.New(shm.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	e, err := rdma.New(rdma.Options{ClusterToken: "hbmsim-test-token"}, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
