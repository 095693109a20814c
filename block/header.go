package block

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// castagnoli is the CRC-32C table; hash/crc32 uses the SSE4.2 CRC32
// instruction for it. Where the CPU has AVX-512 carry-less multiplication,
// long inputs take a folding path several times faster (crc32c_amd64.s).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of p.
func Checksum(p []byte) uint32 { return updateChecksum(0, p) }

// UpdateChecksum extends a running CRC-32C with p.
func UpdateChecksum(crc uint32, p []byte) uint32 { return updateChecksum(crc, p) }

// CRCReader reads from R and keeps the CRC-32C and the count of the bytes
// read, for a reader to check a block as it streams by.
type CRCReader struct {
	R   io.Reader
	N   int64
	Sum uint32
}

func (c *CRCReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.Sum = updateChecksum(c.Sum, p[:n])
	c.N += int64(n)
	return n, err
}

// Codec says how a stored payload is compressed.
type Codec uint8

// Codecs. The numbers are part of the on-media format; never reuse one.
const (
	CodecNone Codec = 0
	CodecS2   Codec = 1
	CodecZstd Codec = 2
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecS2:
		return "s2"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// ParseCodec parses "none", "s2" or "zstd".
func ParseCodec(s string) (Codec, error) {
	switch s {
	case "none", "":
		return CodecNone, nil
	case "s2":
		return CodecS2, nil
	case "zstd":
		return CodecZstd, nil
	}
	return 0, fmt.Errorf("block: unknown codec %q: want none, s2 or zstd", s)
}

// HeaderSize is the encoded size of a Header in bytes.
const HeaderSize = 20

// headerMagic marks the start of every stored block ("YB") so a reader that
// lands on the wrong offset fails loudly instead of decoding garbage.
const (
	headerMagic0  = 'Y'
	headerMagic1  = 'B'
	headerVersion = 1
)

// Header frames a stored block. Checksum covers the uncompressed payload, so a
// block is verified end to end, after decompression; the header has its own
// CRC so a torn or misplaced header is detected before its lengths are used.
//
// Layout (little-endian):
//
//	0  2  magic "YB"
//	2  1  version (1)
//	3  1  codec
//	4  4  raw (uncompressed) length
//	8  4  stored length (after compression; equal to raw for CodecNone)
//	12 4  CRC-32C of the raw payload
//	16 4  CRC-32C of bytes 0..15
type Header struct {
	Codec     Codec
	RawLen    uint32
	StoredLen uint32
	Checksum  uint32
}

// MaxPayload is the largest payload a Header can describe.
const MaxPayload = 1<<32 - 1

// Encode writes h into b, which must be at least HeaderSize bytes long.
func (h Header) Encode(b []byte) {
	_ = b[HeaderSize-1]
	b[0], b[1], b[2], b[3] = headerMagic0, headerMagic1, headerVersion, byte(h.Codec)
	binary.LittleEndian.PutUint32(b[4:], h.RawLen)
	binary.LittleEndian.PutUint32(b[8:], h.StoredLen)
	binary.LittleEndian.PutUint32(b[12:], h.Checksum)
	binary.LittleEndian.PutUint32(b[16:], Checksum(b[:16]))
}

// DecodeHeader parses and verifies a header. Errors wrap ErrCorrupt.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: header is %d bytes, want %d", ErrCorrupt, len(b), HeaderSize)
	}
	if b[0] != headerMagic0 || b[1] != headerMagic1 {
		return Header{}, fmt.Errorf("%w: bad header magic %x", ErrCorrupt, b[:2])
	}
	if got, want := Checksum(b[:16]), binary.LittleEndian.Uint32(b[16:]); got != want {
		return Header{}, fmt.Errorf("%w: header checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	if b[2] != headerVersion {
		return Header{}, fmt.Errorf("%w: unsupported header version %d", ErrCorrupt, b[2])
	}
	h := Header{
		Codec:     Codec(b[3]),
		RawLen:    binary.LittleEndian.Uint32(b[4:]),
		StoredLen: binary.LittleEndian.Uint32(b[8:]),
		Checksum:  binary.LittleEndian.Uint32(b[12:]),
	}
	switch {
	case h.Codec > CodecZstd:
		return Header{}, fmt.Errorf("%w: unknown codec %d", ErrCorrupt, h.Codec)
	case h.Codec == CodecNone && h.StoredLen != h.RawLen:
		return Header{}, fmt.Errorf("%w: uncompressed block with stored length %d != raw length %d", ErrCorrupt, h.StoredLen, h.RawLen)
	}
	return h, nil
}

// Verify checks that payload (the uncompressed bytes) matches the header.
func (h Header) Verify(payload []byte) error { return Verify(payload, uint64(h.RawLen), h.Checksum) }

// Verify checks a block read back from a tier against the length and
// CRC-32C recorded when it was written (a Header, or the S3 tier's segment
// footer): the one check every tier makes before it serves stored bytes.
// Errors wrap ErrCorrupt, which the tiers report as tier.ErrCorrupt after
// dropping the block.
func Verify(payload []byte, size uint64, crc uint32) error {
	if uint64(len(payload)) != size {
		return fmt.Errorf("%w: payload is %d bytes, want %d", ErrCorrupt, len(payload), size)
	}
	if got := Checksum(payload); got != crc {
		return fmt.Errorf("%w: payload checksum %08x, want %08x", ErrCorrupt, got, crc)
	}
	return nil
}
