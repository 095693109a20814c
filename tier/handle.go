package tier

import (
	"fmt"
	"io"
	"sync/atomic"
)

// Ref is the pin behind a Handle: Retain takes another pin on the same bytes,
// Release drops one. Tiers implement it on their block records.
type Ref interface {
	Retain()
	Release()
}

// Handle is a pinned, read-only view of a block. Its bytes stay valid until
// Release; after that they may be reused for another block, so a caller must
// not keep the slice. A Handle is safe for concurrent reads; Release must be
// called exactly once (later calls are no-ops).
type Handle struct {
	data     []byte
	sum      uint32
	ref      Ref
	released atomic.Bool
}

// NewHandle wraps bytes pinned by ref (nil when the bytes are the caller's
// own and need no release).
func NewHandle(data []byte, checksum uint32, ref Ref) *Handle {
	return &Handle{data: data, sum: checksum, ref: ref}
}

// Bytes returns the block's bytes. The caller must not modify them and must
// not use them after Release.
func (h *Handle) Bytes() []byte { return h.data }

// Len returns the block's size in bytes.
func (h *Handle) Len() int { return len(h.data) }

// Checksum returns the CRC-32C of the bytes.
func (h *Handle) Checksum() uint32 { return h.sum }

// Clone returns a second handle on the same bytes, with its own pin.
func (h *Handle) Clone() *Handle {
	if h.released.Load() {
		panic("BUG: tier: Clone of a released Handle")
	}
	if h.ref != nil {
		h.ref.Retain()
	}
	return &Handle{data: h.data, sum: h.sum, ref: h.ref}
}

// Release drops the pin.
func (h *Handle) Release() {
	if h.released.Swap(true) {
		return
	}
	h.data = nil
	if h.ref != nil {
		h.ref.Release()
	}
}

// WriteTo writes the bytes to w straight from the pinned view.
func (h *Handle) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(h.data)
	return int64(n), err
}

// ReadAt implements io.ReaderAt over the block.
func (h *Handle) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("tier: ReadAt at negative offset %d", off)
	}
	if off >= int64(len(h.data)) {
		return 0, io.EOF
	}
	n := copy(p, h.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
