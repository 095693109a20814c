package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/internal/servetest"
	"github.com/yuebing/yuebing/rdma"
)

// A same-host session against a real node: blocks put through the segment
// read back through it, and over HTTP; a missing block is a missing frame; a
// segment smaller than a block refuses it; a dead node breaks the session.
func TestStaging(t *testing.T) {
	proc, url := servetest.Serve(t)
	cl, err := client.New(url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "acme/shm"
	st, err := cl.OpenStaging(ctx, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Size() != 64<<10 {
		t.Fatalf("size %d", st.Size())
	}
	// Five blocks of 20 KiB: three fit the segment at once, so both
	// calls split.
	var items []client.Item
	var keys []block.Key
	for i := range 5 {
		data := bytes.Repeat([]byte{byte(i + 1)}, 20<<10+i)
		k := block.OpaqueKey(ns, fmt.Appendf(nil, "b%d", i))
		items = append(items, client.Item{Key: k, Data: data})
		keys = append(keys, k)
	}
	res, err := st.PutBatch(ctx, ns, items)
	if err != nil || len(res) != 5 || res[0].Status != "created" {
		t.Fatalf("put: %+v, %v", res, err)
	}
	if got, _, err := cl.Get(ctx, keys[3], client.GetOptions{}); err != nil || !bytes.Equal(got, items[3].Data) {
		t.Fatalf("HTTP get of a block put through shared memory: %d bytes, %v", len(got), err)
	}
	missing := block.OpaqueKey(ns, []byte("nothing"))
	ask := append(append([]block.Key{}, keys...), missing)
	sizes := make([]int64, len(ask))
	for i := range sizes {
		sizes[i] = 21 << 10
	}
	i := 0
	err = st.GetBatch(ctx, ns, ask, sizes, func(f client.Frame, r io.Reader) error {
		got, err := io.ReadAll(r)
		switch {
		case err != nil:
			return err
		case i == 5 && !f.Missing:
			t.Errorf("missing block came as %+v", f)
		case i < 5 && (f.Missing || !bytes.Equal(got, items[i].Data) || f.Key != keys[i]):
			t.Errorf("block %d: %+v, %d bytes", i, f, len(got))
		}
		i++
		return nil
	})
	if err != nil || i != 6 {
		t.Fatalf("get: %d frames, %v", i, err)
	}
	if _, err := st.PutBatch(ctx, ns, []client.Item{{Key: missing, Data: make([]byte, 65<<10)}}); !errors.Is(err, client.ErrTooLarge) {
		t.Fatalf("a block over the segment: %v", err)
	}
	proc.Kill()
	err = st.GetBatch(ctx, ns, keys[:1], sizes[:1], func(client.Frame, io.Reader) error {
		t.Error("a frame from a dead node")
		return nil
	})
	if err == nil || !st.Broken() {
		t.Fatalf("after the kill: %v, broken %v", err, st.Broken())
	}
	if err := st.GetBatch(context.Background(), ns, keys[:1], sizes[:1], nil); !errors.Is(err, client.ErrStagingBroken) {
		t.Fatalf("a broken session: %v", err)
	}
}

func TestStagingOff(t *testing.T) {
	_, url := servetest.Serve(t, "--shm-listen", "")
	cl, _ := client.New(url, client.Options{})
	if _, err := cl.OpenStaging(t.Context(), 1<<20); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a node with shared memory off: %v", err)
	}
}

// Blocks move between a real node and the caller's own memfd with no
// segment between: a put from the region and a get into another range of
// it, the bytes equal, nothing counted as staged; a block larger than its
// range is missing; a region the node refuses fails Register and leaves the
// session usable.
func TestStagingRegions(t *testing.T) {
	_, url := servetest.Serve(t)
	cl, err := client.New(url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "acme/regions"
	st, err := cl.OpenStaging(ctx, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	region, err := rdma.NewSharedMemory("client-test", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer region.Close()
	mem := region.Bytes()
	var puts, gets []client.RegionItem
	for i := range 3 {
		n := int64(100<<10 + i*4099)
		off := int64(i) * (160 << 10)
		for j := range n {
			mem[off+j] = byte(int64(i)*31 + j*7 + j>>12)
		}
		k := block.OpaqueKey(ns, fmt.Appendf(nil, "r%d", i))
		puts = append(puts, client.RegionItem{Key: k, Region: region, Offset: off, Length: n})
		gets = append(gets, client.RegionItem{Key: k, Region: region, Offset: 512<<10 + off, Length: 160 << 10})
	}
	res, err := st.PutFrom(ctx, ns, puts)
	if err != nil || len(res) != 3 || res[2].Status != "created" {
		t.Fatalf("put from the region: %+v, %v", res, err)
	}
	if got, _, err := cl.Get(ctx, puts[1].Key, client.GetOptions{}); err != nil || !bytes.Equal(got, mem[puts[1].Offset:puts[1].Offset+puts[1].Length]) {
		t.Fatalf("HTTP get of a block put from a region: %d bytes, %v", len(got), err)
	}
	small := client.RegionItem{Key: puts[0].Key, Region: region, Offset: 1000 << 10, Length: 4096}
	seen := 0
	err = st.GetInto(ctx, ns, append(gets, small), func(i int, f client.Frame) error {
		seen++
		if i == 3 {
			if !f.Missing {
				t.Errorf("a block larger than its range came as %+v", f)
			}
			return nil
		}
		p, g := puts[i], gets[i]
		if f.Missing || f.Length != p.Length || !bytes.Equal(mem[g.Offset:g.Offset+f.Length], mem[p.Offset:p.Offset+p.Length]) {
			t.Errorf("block %d: %+v", i, f)
		}
		return nil
	})
	if err != nil || seen != 4 {
		t.Fatalf("get into the region: %d frames, %v", seen, err)
	}
	c := st.Counters()
	if want := 2 * (puts[0].Length + puts[1].Length + puts[2].Length); c.StagedBytes != 0 || c.DirectBytes != want {
		t.Fatalf("counters %+v: want 0 staged, %d direct", c, want)
	}
	// An unsealed memfd can shrink under the node's copies: refused, and
	// the session goes on.
	if _, err := st.Register(ctx, unsealed(t, 1<<16)); !errors.Is(err, client.ErrRegionRefused) || !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("registering an unsealed memfd: %v", err)
	}
	if err := st.GetInto(ctx, ns, gets[:1], func(int, client.Frame) error { return nil }); err != nil || st.Broken() {
		t.Fatalf("a get after a refused region: %v", err)
	}
	if err := st.Unregister(ctx, region); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(mem[puts[0].Offset : puts[0].Offset+puts[0].Length])
	clear(mem)
	if err := st.GetInto(ctx, ns, gets[:1], func(_ int, f client.Frame) error {
		if f.Missing || !bytes.Equal(mem[gets[0].Offset:gets[0].Offset+f.Length], want) {
			t.Errorf("get after unregistering: %+v", f)
		}
		return nil
	}); err != nil {
		t.Fatalf("a region unregistered is registered again on use: %v", err)
	}
}

// unsealedRegion is a memfd without seals.
type unsealedRegion struct {
	f   *os.File
	mem []byte
}

func (u *unsealedRegion) File() *os.File { return u.f }
func (u *unsealedRegion) Bytes() []byte  { return u.mem }

func unsealed(t *testing.T, size int) client.Region {
	t.Helper()
	fd, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "unsealed")
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(int64(size)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return &unsealedRegion{f: f, mem: mem}
}
