package tier

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/yuebing/yuebing/block"
)

// Ref is the pin behind a Handle: Retain takes another pin on the same bytes,
// Release drops one. Tiers implement it on their block records.
type Ref interface {
	Retain()
	Release()
}

// ChecksumCache is implemented by a Ref whose block computes its checksum on
// first use (the DRAM tier's default) and keeps it for every later reader.
type ChecksumCache interface {
	Checksum(data []byte) uint32
	KnownChecksum() (uint32, bool)
}

// Handle is a pinned, read-only view of a block. Its bytes stay valid until
// Release; after that they may be reused for another block, so a caller must
// not keep the slice. A Handle is safe for concurrent reads; Release must be
// called exactly once (later calls are no-ops).
type Handle struct {
	data     []byte
	sum      atomic.Uint64 // checksum | 1<<32 once known
	ref      Ref
	released atomic.Bool
}

const sumKnown = 1 << 32

// NewHandle wraps bytes pinned by ref (nil when the bytes are the caller's
// own and need no release) whose checksum is known.
func NewHandle(data []byte, checksum uint32, ref Ref) *Handle {
	h := &Handle{data: data, ref: ref}
	h.sum.Store(uint64(checksum) | sumKnown)
	return h
}

// NewLazyHandle wraps bytes whose checksum is computed on first use; a ref
// that implements ChecksumCache computes it once for all its handles.
func NewLazyHandle(data []byte, ref Ref) *Handle {
	return &Handle{data: data, ref: ref}
}

// Bytes returns the block's bytes. The caller must not modify them and must
// not use them after Release.
func (h *Handle) Bytes() []byte { return h.data }

// Len returns the block's size in bytes.
func (h *Handle) Len() int { return len(h.data) }

// Checksum returns the CRC-32C of the bytes, computing it if nobody has yet.
func (h *Handle) Checksum() uint32 {
	if v := h.sum.Load(); v&sumKnown != 0 {
		return uint32(v)
	}
	var sum uint32
	if c, ok := h.ref.(ChecksumCache); ok {
		sum = c.Checksum(h.data)
	} else {
		sum = block.Checksum(h.data)
	}
	h.sum.Store(uint64(sum) | sumKnown)
	return sum
}

// KnownChecksum returns the checksum if it has been computed, without
// computing it.
func (h *Handle) KnownChecksum() (uint32, bool) {
	if v := h.sum.Load(); v&sumKnown != 0 {
		return uint32(v), true
	}
	if c, ok := h.ref.(ChecksumCache); ok {
		return c.KnownChecksum()
	}
	return 0, false
}

// Clone returns a second handle on the same bytes, with its own pin.
func (h *Handle) Clone() *Handle {
	if h.released.Load() {
		panic("BUG: tier: Clone of a released Handle")
	}
	if h.ref != nil {
		h.ref.Retain()
	}
	c := &Handle{data: h.data, ref: h.ref}
	c.sum.Store(h.sum.Load())
	return c
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
