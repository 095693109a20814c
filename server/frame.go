package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/yuebing/yuebing/block"
)

// The framed body of multi-put requests and multi-get responses
// (docs/api.md has a worked example):
//
//	magic "YBF1", then frames back to back until the body ends.
//	frame header, 48 bytes, integers little-endian:
//	  0:32  key, 32 raw bytes
//	  32:36 flags u32: bit 0 crc32c is set, bit 1 block missing (responses),
//	        bits 8-15 tier the block came from (responses; 255: another
//	        node); others zero
//	  36:40 crc32c u32 of the data (when bit 0 is set)
//	  40:48 length u64 of the data
//	then length bytes of data.
//
// A length-prefixed binary layout streams in both directions without
// buffering a whole block, and its decoder is a few bounds checks.
const (
	frameMagic      = "YBF1"
	frameHeaderSize = 48

	frameHasCRC  = 1 << 0
	frameMissing = 1 << 1
	frameTierPos = 8
	// frameTierRemote in the tier bits: read from another node.
	frameTierRemote = 0xff
	// framePutFlags are the flags a multi-put frame may carry.
	framePutFlags = frameHasCRC
)

// FramesContentType is the media type of framed bodies.
const FramesContentType = "application/x-yuebing-frames"

// frameHeader is one decoded frame header.
type frameHeader struct {
	Key    block.Key
	Flags  uint32
	CRC    uint32
	Length uint64
}

func (h frameHeader) hasCRC() bool { return h.Flags&frameHasCRC != 0 }

func (h frameHeader) encode(b *[frameHeaderSize]byte) {
	copy(b[:32], h.Key[:])
	binary.LittleEndian.PutUint32(b[32:], h.Flags)
	binary.LittleEndian.PutUint32(b[36:], h.CRC)
	binary.LittleEndian.PutUint64(b[40:], h.Length)
}

// frameReader decodes a framed body. The caller reads each frame's data
// from Data before asking for the next header; Next skips what it left.
type frameReader struct {
	r         io.Reader
	allowed   uint32 // flags a frame may carry
	maxLength uint64 // largest frame data accepted
	started   bool
	left      int64 // data of the current frame not yet read
	n         int   // frames returned so far
}

func newFrameReader(r io.Reader, allowedFlags uint32, maxLength int64) *frameReader {
	return &frameReader{r: r, allowed: allowedFlags, maxLength: uint64(maxLength)}
}

// Next returns the next frame header, io.EOF at the clean end of the body,
// and an error wrapping ErrBadRequest for a malformed body (or ErrTooLarge
// for a frame over the limit).
func (f *frameReader) Next() (frameHeader, error) {
	if !f.started {
		f.started = true
		var m [len(frameMagic)]byte
		if _, err := io.ReadFull(f.r, m[:]); err != nil {
			if err == io.EOF {
				return frameHeader{}, fmt.Errorf("%w: empty framed body: want the magic %q", ErrBadRequest, frameMagic)
			}
			return frameHeader{}, f.readErr("magic", err)
		}
		if string(m[:]) != frameMagic {
			return frameHeader{}, fmt.Errorf("%w: framed body starts with %q, want the magic %q", ErrBadRequest, m[:], frameMagic)
		}
	}
	if f.left > 0 {
		if _, err := io.CopyN(io.Discard, f.r, f.left); err != nil {
			return frameHeader{}, f.readErr(fmt.Sprintf("frame %d data", f.n), err)
		}
		f.left = 0
	}
	var b [frameHeaderSize]byte
	n, err := io.ReadFull(f.r, b[:])
	if err == io.EOF && n == 0 {
		return frameHeader{}, io.EOF
	}
	if err != nil {
		return frameHeader{}, f.readErr(fmt.Sprintf("frame %d header", f.n+1), err)
	}
	var h frameHeader
	copy(h.Key[:], b[:32])
	h.Flags = binary.LittleEndian.Uint32(b[32:])
	h.CRC = binary.LittleEndian.Uint32(b[36:])
	h.Length = binary.LittleEndian.Uint64(b[40:])
	f.n++
	if bad := h.Flags &^ f.allowed; bad != 0 {
		return frameHeader{}, fmt.Errorf("%w: frame %d has unknown flags %#x", ErrBadRequest, f.n, bad)
	}
	if h.Length > f.maxLength {
		return frameHeader{}, fmt.Errorf("%w: frame %d is %d bytes, the limit is %d", ErrTooLarge, f.n, h.Length, f.maxLength)
	}
	f.left = int64(h.Length)
	return h, nil
}

// Data returns a reader of the current frame's data.
func (f *frameReader) Data() io.Reader { return &frameData{f} }

type frameData struct{ f *frameReader }

func (d *frameData) Read(p []byte) (int, error) {
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
		return n, fmt.Errorf("%w: frame %d is truncated: %d bytes missing", ErrBadRequest, f.n, f.left)
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func (f *frameReader) readErr(what string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: framed body ends inside %s", ErrBadRequest, what)
	}
	return err
}
