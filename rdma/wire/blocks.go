package wire

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma"
)

// MaxGetKeys bounds the keys of one Get frame: its payload is the keys,
// block.KeySize bytes each, and a control payload is at most MaxControl.
const MaxGetKeys = MaxControl / block.KeySize

// MaxBlockAttr bounds the attribute a Block frame carries with a block.
const MaxBlockAttr = MaxControl - blockSumSize

// blockSumSize is the block's CRC-32C at the head of a Block frame's
// control payload.
const blockSumSize = 4

// AppendKeys appends the payload of a Get frame for keys.
func AppendKeys(dst []byte, keys []block.Key) []byte {
	for _, k := range keys {
		dst = append(dst, k[:]...)
	}
	return dst
}

// ParseKeys decodes a Get frame's payload: one to MaxGetKeys keys.
func ParseKeys(p []byte) ([]block.Key, error) {
	if len(p) == 0 || len(p)%block.KeySize != 0 || len(p)/block.KeySize > MaxGetKeys {
		return nil, fmt.Errorf("%w: get payload of %d bytes, want 1 to %d keys of %d bytes", rdma.ErrProtocol, len(p), MaxGetKeys, block.KeySize)
	}
	keys := make([]block.Key, len(p)/block.KeySize)
	for i := range keys {
		copy(keys[i][:], p[i*block.KeySize:])
	}
	return keys, nil
}

// A Block frame answers the index-th key of Get id. Found: Code 0, Offset
// the block's size, and a control payload of the block's CRC-32C (4 bytes)
// then its attribute; the size bytes of the block follow the payload, with
// no trailer: the CRC that travels is the one the block was stored with, so
// the sender never reads the bytes to checksum them, and a receiver checks
// them end to end. Not held: Code CodeNotFound and nothing else.
//
// The header's segment field carries index, its offset field the size.

// BlockAnswer is what a Block frame says about one key.
type BlockAnswer struct {
	Found    bool
	Size     uint64
	Checksum uint32
	// Attr is opaque to the transfer service: the block's record, as the
	// serving side chooses to describe it. At most MaxBlockAttr bytes.
	Attr []byte
}

// BlockHead returns the part of the Block frame of key index of Get id
// that comes before the block's bytes: header, CRC and attribute, or, for
// a key not held, the whole frame.
func BlockHead(version uint8, id, index uint64, a BlockAnswer) []byte {
	h := Header{Version: version, Type: Block, ID: id, Segment: index}
	b := make([]byte, HeaderSize, HeaderSize+blockSumSize+len(a.Attr))
	if !a.Found {
		h.Code = CodeNotFound
		h.Put(b)
		return b
	}
	if len(a.Attr) > MaxBlockAttr {
		panic("BUG: wire: a block attribute over MaxBlockAttr")
	}
	b = binary.LittleEndian.AppendUint32(b, a.Checksum)
	b = append(b, a.Attr...)
	ctl := b[HeaderSize:]
	h.Length, h.CRC, h.Offset = uint32(len(ctl)), block.Checksum(ctl), a.Size
	h.Put(b)
	return b
}

// ReadBlock reads the rest of a Block frame whose header is h, up to the
// block's bytes, which the caller reads next (a.Size of them). It checks h
// against Get id's index-th key and the size against maxSize.
func ReadBlock(r io.Reader, h Header, id, index uint64, maxSize int64) (BlockAnswer, error) {
	if h.Type != Block || h.ID != id || h.Segment != index {
		return BlockAnswer{}, fmt.Errorf("%w: %s frame for request %d key %d, want block for %d key %d", rdma.ErrProtocol, h.Type, h.ID, h.Segment, id, index)
	}
	switch h.Code {
	case CodeNotFound:
		if h.Length != 0 || h.CRC != 0 || h.Offset != 0 {
			return BlockAnswer{}, fmt.Errorf("%w: a not-held block frame with fields set", rdma.ErrProtocol)
		}
		return BlockAnswer{}, nil
	case 0:
	default:
		return BlockAnswer{}, fmt.Errorf("%w: block frame code %d", rdma.ErrProtocol, h.Code)
	}
	if h.Offset > uint64(max(maxSize, 0)) {
		return BlockAnswer{}, fmt.Errorf("%w: block of %d bytes, at most %d", rdma.ErrProtocol, h.Offset, maxSize)
	}
	if h.Length < blockSumSize {
		return BlockAnswer{}, fmt.Errorf("%w: block frame payload of %d bytes", rdma.ErrProtocol, h.Length)
	}
	ctl, err := ReadControl(r, h, MaxControl)
	if err != nil {
		return BlockAnswer{}, err
	}
	a := BlockAnswer{Found: true, Size: h.Offset, Checksum: binary.LittleEndian.Uint32(ctl)}
	if len(ctl) > blockSumSize {
		a.Attr = ctl[blockSumSize:]
	}
	return a, nil
}
