package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/yuebing/yuebing/block"
)

const (
	// Magic starts every framed body.
	Magic = "YBF1"
	// HeaderSize is the encoded size of a Header.
	HeaderSize = 48
	// ContentType is the media type of framed bodies.
	ContentType = "application/x-yuebing-frames"

	// FlagCRC: the header's CRC is the crc32c of the data.
	FlagCRC = 1 << 0
	// FlagMissing: the block is not stored (answers); no data follows.
	FlagMissing = 1 << 1
	// FlagParent: the key of the block's chain parent, 32 raw bytes,
	// follows the header, before the data (Length does not count it).
	// Multi-put frames only; a reader that does not allow it refuses the
	// frame, so a sender never has its parents silently dropped.
	FlagParent = 1 << 2
	// TierShift is where the tier a block came from sits in the flags.
	TierShift = 8
	// TierRemote in the tier bits: read from another node.
	TierRemote = 0xff
	// PutFlags are the flags a multi-put frame may carry.
	PutFlags = FlagCRC | FlagParent
)

var (
	// ErrMalformed: a body that is not a well-formed framed body.
	ErrMalformed = errors.New("frame: malformed framed body")
	// ErrTooLarge: a frame whose data is over the reader's limit.
	ErrTooLarge = errors.New("frame: frame too large")
)

// Header is one frame's header.
type Header struct {
	Key    block.Key
	Flags  uint32
	CRC    uint32
	Length uint64
	// Parent is the chain parent's key when FlagParent is set. It is not
	// part of the fixed HeaderSize bytes: Encode leaves it out and
	// AppendParent writes it after them.
	Parent block.Key
}

// HasParent reports whether Parent is set.
func (h Header) HasParent() bool { return h.Flags&FlagParent != 0 }

// AppendParent appends what follows the fixed header before the data: the
// parent key when FlagParent is set, else nothing.
func (h Header) AppendParent(b []byte) []byte {
	if !h.HasParent() {
		return b
	}
	return append(b, h.Parent[:]...)
}

// HasCRC reports whether CRC is set.
func (h Header) HasCRC() bool { return h.Flags&FlagCRC != 0 }

// Missing reports a block that is not stored.
func (h Header) Missing() bool { return h.Flags&FlagMissing != 0 }

// Tier is the tier the block came from, or TierRemote.
func (h Header) Tier() int { return int(h.Flags>>TierShift) & 0xff }

// Encode writes h into b.
func (h Header) Encode(b *[HeaderSize]byte) {
	copy(b[:32], h.Key[:])
	binary.LittleEndian.PutUint32(b[32:], h.Flags)
	binary.LittleEndian.PutUint32(b[36:], h.CRC)
	binary.LittleEndian.PutUint64(b[40:], h.Length)
}

// Decode reads a header from b.
func Decode(b *[HeaderSize]byte) Header {
	var h Header
	copy(h.Key[:], b[:32])
	h.Flags = binary.LittleEndian.Uint32(b[32:])
	h.CRC = binary.LittleEndian.Uint32(b[36:])
	h.Length = binary.LittleEndian.Uint64(b[40:])
	return h
}

// Reader decodes a framed body. The caller reads each frame's data from
// Data before asking for the next header; Next skips what it left.
type Reader struct {
	r         io.Reader
	allowed   uint32 // flags a frame may carry
	maxLength uint64 // largest frame data accepted
	started   bool
	left      int64 // data of the current frame not yet read
	n         int   // frames returned so far
}

// NewReader returns a reader of the framed body r that refuses frames with
// flags outside allowedFlags or data over maxLength bytes.
func NewReader(r io.Reader, allowedFlags uint32, maxLength int64) *Reader {
	return &Reader{r: r, allowed: allowedFlags, maxLength: uint64(maxLength)}
}

// Next returns the next frame header, io.EOF at the clean end of the body,
// and an error wrapping ErrMalformed for a malformed body (or ErrTooLarge
// for a frame over the limit).
func (f *Reader) Next() (Header, error) {
	if !f.started {
		f.started = true
		var m [len(Magic)]byte
		if _, err := io.ReadFull(f.r, m[:]); err != nil {
			if err == io.EOF {
				return Header{}, fmt.Errorf("%w: empty framed body: want the magic %q", ErrMalformed, Magic)
			}
			return Header{}, f.readErr("magic", err)
		}
		if string(m[:]) != Magic {
			return Header{}, fmt.Errorf("%w: framed body starts with %q, want the magic %q", ErrMalformed, m[:], Magic)
		}
	}
	if f.left > 0 {
		if _, err := io.CopyN(io.Discard, f.r, f.left); err != nil {
			return Header{}, f.readErr(fmt.Sprintf("frame %d data", f.n), err)
		}
		f.left = 0
	}
	var b [HeaderSize]byte
	n, err := io.ReadFull(f.r, b[:])
	if err == io.EOF && n == 0 {
		return Header{}, io.EOF
	}
	if err != nil {
		return Header{}, f.readErr(fmt.Sprintf("frame %d header", f.n+1), err)
	}
	h := Decode(&b)
	f.n++
	if bad := h.Flags &^ f.allowed; bad != 0 {
		return Header{}, fmt.Errorf("%w: frame %d has unknown flags %#x", ErrMalformed, f.n, bad)
	}
	if h.Length > f.maxLength {
		return Header{}, fmt.Errorf("%w: frame %d is %d bytes, the limit is %d", ErrTooLarge, f.n, h.Length, f.maxLength)
	}
	if h.HasParent() {
		if _, err := io.ReadFull(f.r, h.Parent[:]); err != nil {
			return Header{}, f.readErr(fmt.Sprintf("frame %d parent key", f.n), err)
		}
	}
	f.left = int64(h.Length)
	return h, nil
}

// Frames returns how many headers Next has returned.
func (f *Reader) Frames() int { return f.n }

// Data returns a reader of the current frame's data. It fails with an
// error wrapping ErrMalformed if the body ends inside the data.
func (f *Reader) Data() io.Reader { return &data{f} }

type data struct{ f *Reader }

func (d *data) Read(p []byte) (int, error) {
	f := d.f
	if f.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > f.left {
		p = p[:f.left]
	}
	n, err := f.r.Read(p)
	f.left -= int64(n)
	if err == io.EOF && f.left > 0 {
		return n, fmt.Errorf("%w: frame %d is truncated: %d bytes missing", ErrMalformed, f.n, f.left)
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func (f *Reader) readErr(what string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: framed body ends inside %s", ErrMalformed, what)
	}
	return err
}
