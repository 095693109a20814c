package cluster

import (
	"bytes"
	"errors"
	"testing"

	"github.com/yuebing/yuebing/rdma/wire"
)

func TestAttr(t *testing.T) {
	f := func(pinned int64, meta []byte, wantPinned int64, wantMeta []byte) {
		t.Helper()
		p, m, err := decodeAttr(encodeAttr(pinned, meta))
		if err != nil || p != wantPinned || !bytes.Equal(m, wantMeta) {
			t.Fatalf("encodeAttr(%d, %q) reads back as %d %q %v", pinned, meta, p, m, err)
		}
	}
	f(0, nil, 0, nil)
	f(1700000000, []byte("rec"), 1700000000, []byte("rec"))
	f(-5, []byte("rec"), 0, []byte("rec"))                      // no pin before 1970
	f(1, make([]byte, wire.MaxBlockAttr-attrPinSize+1), 1, nil) // a record too long for the wire goes without it
	f(1, bytes.Repeat([]byte{7}, wire.MaxBlockAttr-attrPinSize), 1, bytes.Repeat([]byte{7}, wire.MaxBlockAttr-attrPinSize))
	for _, b := range [][]byte{nil, {1, 2, 3}, {0, 0, 0, 0, 0, 0, 0, 0x80}} {
		if _, _, err := decodeAttr(b); !errors.Is(err, ErrBadRequest) {
			t.Errorf("decodeAttr(%x) = %v, want ErrBadRequest", b, err)
		}
	}
}

// FuzzDecodeAttr: any attribute a holder sends is a pin and a record, or
// ErrBadRequest, never a panic; what decodes encodes back to itself.
func FuzzDecodeAttr(f *testing.F) {
	f.Add(encodeAttr(1700000000, []byte("rec")))
	f.Add([]byte{1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, m, err := decodeAttr(b)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v is not ErrBadRequest", err)
			}
			return
		}
		if p < 0 {
			t.Fatalf("negative pin %d", p)
		}
		if len(b) <= wire.MaxBlockAttr && !bytes.Equal(encodeAttr(p, m), b) {
			t.Fatalf("%x decodes to %d %q, which encodes to %x", b, p, m, encodeAttr(p, m))
		}
	})
}
