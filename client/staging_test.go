package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/internal/servetest"
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
