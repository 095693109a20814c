package ssd

import (
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/yuebing/yuebing/block"
)

// A record is one block in a segment file: a 64-byte header, the stored
// (possibly compressed) payload, then the block's metadata (tier.PutOptions
// Meta). Records are self-describing, so the segment files alone are enough
// to rebuild the index, and verifiable: the header checks itself and names
// its key; the payload's CRC-32C covers the uncompressed bytes; the metadata
// has a CRC of its own.
//
//	0  20  block.Header (codec, raw length, stored length, payload CRC-32C)
//	20 32  block key
//	52 4   CRC-32C of bytes 0..51 and 56..63
//	56 2   metadata length
//	58 4   CRC-32C of the metadata
//	62 2   reserved, zero
//	64 ..  stored payload, then metadata
const recHeaderSize = 64

type recHeader struct {
	key     block.Key
	hdr     block.Header
	metaLen int
	metaSum uint32
}

func (r recHeader) recLen() int64 {
	return recHeaderSize + int64(r.hdr.StoredLen) + int64(r.metaLen)
}

func headerChecksum(b []byte) uint32 {
	return block.UpdateChecksum(block.Checksum(b[:52]), b[56:64])
}

func encodeRecHeader(b []byte, key block.Key, h block.Header, meta []byte) {
	_ = b[recHeaderSize-1]
	h.Encode(b[0:block.HeaderSize])
	copy(b[20:52], key[:])
	binary.LittleEndian.PutUint16(b[56:], uint16(len(meta)))
	binary.LittleEndian.PutUint32(b[58:], block.Checksum(meta))
	clear(b[62:64])
	binary.LittleEndian.PutUint32(b[52:], headerChecksum(b))
}

func decodeRecHeader(b []byte) (recHeader, error) {
	var r recHeader
	if len(b) < recHeaderSize {
		return r, fmt.Errorf("%w: record header is %d bytes", block.ErrCorrupt, len(b))
	}
	if got, want := headerChecksum(b), binary.LittleEndian.Uint32(b[52:]); got != want {
		return r, fmt.Errorf("%w: record header checksum %08x, want %08x", block.ErrCorrupt, got, want)
	}
	h, err := block.DecodeHeader(b[:block.HeaderSize])
	if err != nil {
		return r, err
	}
	r.hdr = h
	copy(r.key[:], b[20:52])
	r.metaLen = int(binary.LittleEndian.Uint16(b[56:]))
	r.metaSum = binary.LittleEndian.Uint32(b[58:])
	return r, nil
}

// codec compresses payloads for one tier. It is safe for concurrent use: the
// zstd encoder and decoder are shared, as their package allows.
type codec struct {
	kind block.Codec
	zenc *zstd.Encoder
	zdec *zstd.Decoder
	// maxDecoded bounds what a stored payload may decode to, for both
	// codecs: a damaged s2 length prefix must not allocate gigabytes.
	maxDecoded int64
}

func newCodec(kind block.Codec, maxBlock int64) (*codec, error) {
	c := &codec{kind: kind, maxDecoded: maxBlock + 1<<20}
	var err error
	// The decoder is always ready: a tier reopened with compression turned
	// off still reads the blocks it stored compressed.
	c.zdec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(uint64(c.maxDecoded)))
	if err != nil {
		return nil, fmt.Errorf("ssd: zstd decoder: %w", err)
	}
	if kind == block.CodecZstd {
		// SpeedFastest: the SSD tier sits on the demotion path, where
		// throughput matters more than the last few percent of ratio.
		c.zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("ssd: zstd encoder: %w", err)
		}
	}
	return c, nil
}

// compress returns the bytes to store and their codec. A payload that
// compresses by less than 1/16 is stored raw: decompressing it on every read
// would cost more than the space saves.
func (c *codec) compress(raw []byte) ([]byte, block.Codec) {
	var out []byte
	switch c.kind {
	case block.CodecS2:
		out = s2.Encode(nil, raw)
	case block.CodecZstd:
		out = c.zenc.EncodeAll(raw, make([]byte, 0, len(raw)/2))
	default:
		return raw, block.CodecNone
	}
	if len(out) > len(raw)-len(raw)/16 {
		return raw, block.CodecNone
	}
	return out, c.kind
}

// decompress returns the raw payload of stored bytes, checking that it has
// the length the header promised before trusting it.
func (c *codec) decompress(stored []byte, h block.Header) ([]byte, error) {
	switch h.Codec {
	case block.CodecNone:
		return stored, nil
	case block.CodecS2:
		n, err := s2.DecodedLen(stored)
		if err != nil || n != int(h.RawLen) || int64(n) > c.maxDecoded {
			return nil, fmt.Errorf("%w: s2 payload decodes to %d bytes, header says %d (%v)", block.ErrCorrupt, n, h.RawLen, err)
		}
		out, err := s2.Decode(make([]byte, n), stored)
		if err != nil {
			return nil, fmt.Errorf("%w: s2: %v", block.ErrCorrupt, err)
		}
		return out, nil
	case block.CodecZstd:
		out, err := c.zdec.DecodeAll(stored, make([]byte, 0, h.RawLen))
		if err != nil || len(out) != int(h.RawLen) {
			return nil, fmt.Errorf("%w: zstd payload decodes to %d bytes, header says %d (%v)", block.ErrCorrupt, len(out), h.RawLen, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unknown codec %d", block.ErrCorrupt, h.Codec)
}

func (c *codec) close() {
	if c.zenc != nil {
		c.zenc.Close()
	}
	c.zdec.Close()
}
