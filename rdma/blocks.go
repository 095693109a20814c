package rdma

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/yuebing/yuebing/block"
)

// Blocks by key. Segments move bytes at offsets both sides agreed on
// beforehand; a node that wants one block another node holds would first
// have to ask for it to be exposed in a segment, then read it, then release
// it: three round trips for one block. A transport that implements
// BlockGetter reads blocks by key instead, in one round trip for any number
// of them, served by the peer's BlockSource straight from the memory the
// block is held in.

// ErrNotSupported reports a transport, or a peer's protocol version, that
// cannot read blocks by key.
var ErrNotSupported = errors.New("rdma: not supported by the transport or the peer")

// PinnedBlock is a block a BlockSource holds still while it is sent.
type PinnedBlock struct {
	// Data is the block's bytes; they must not change until Release.
	Data []byte
	// Checksum is the CRC-32C the block was stored with. It travels with
	// the bytes unrecomputed; the receiver checks it.
	Checksum uint32
	// Attr is opaque to the transfer service (at most 8 KiB - 4 bytes;
	// longer is dropped): whatever the serving side sends along.
	Attr []byte
	// Release unpins Data; nil when there is nothing to release.
	Release func()
}

// BlockSource serves the blocks peers ask for by key.
type BlockSource interface {
	// PinBlock returns key's block pinned, or ok false when this node does
	// not hold it.
	PinBlock(ctx context.Context, key block.Key) (b PinnedBlock, ok bool)
}

// BlockInfo describes one answer of a BlockStream.
type BlockInfo struct {
	// Found is false when the peer does not hold the key; the other fields
	// are then zero.
	Found    bool
	Size     int64
	Checksum uint32
	Attr     []byte
}

// BlockStream is the answer to GetBlocks: one BlockInfo per key asked, in
// order, each found one followed by its bytes, which the caller consumes
// with ReadData or WriteData before the next Next. It is not safe for
// concurrent use.
type BlockStream interface {
	// Next returns the answer for the next key; io.EOF after the last.
	Next() (BlockInfo, error)
	// ReadData reads the current block's bytes into dst, which must be
	// exactly its size.
	ReadData(dst []byte) error
	// Read reads the current block's bytes as an io.Reader would, io.EOF
	// once they are all read.
	Read(p []byte) (int, error)
	// WriteData copies the current block's bytes to w, letting the kernel
	// move them socket to socket where w is a connection that can (no
	// copy through this process's memory), and returns how many it wrote.
	// Fewer than the block's size come with an error.
	WriteData(w io.Writer) (int64, error)
	// Close ends the stream. A stream read to its end leaves its
	// connection for the next GetBlocks; any other is closed.
	Close() error
}

// BlockGetter is a Transport that also serves and reads blocks by key.
type BlockGetter interface {
	// GetBlocks asks peer for keys, in one round trip. maxSize bounds the
	// size of an answer the stream accepts.
	GetBlocks(ctx context.Context, peer string, keys []block.Key, maxSize int64) (BlockStream, error)
}

// blockSource holds the engine's BlockSource; the transport looks it up
// per request, so a source can be set after the engine started.
type blockSource struct{ p atomic.Pointer[BlockSource] }

func (s *blockSource) get() BlockSource {
	if p := s.p.Load(); p != nil {
		return *p
	}
	return nil
}

// ServeBlocks makes src answer peers' requests for blocks by key. Before it
// is called, every key is not held.
func (e *Engine) ServeBlocks(src BlockSource) { e.blocks.p.Store(&src) }

// GetBlocks reads keys from peer (an engine's Addr) by key: see
// BlockGetter. It fails with ErrNotSupported when the transport, or the
// peer's protocol version, cannot.
func (e *Engine) GetBlocks(ctx context.Context, peer string, keys []block.Key, maxSize int64) (BlockStream, error) {
	g, ok := e.tr.(BlockGetter)
	if !ok {
		return nil, fmt.Errorf("rdma: %s transport: %w", e.tr.Name(), ErrNotSupported)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrInvalidRequest)
	}
	if e.isClosed() {
		return nil, ErrClosed
	}
	return g.GetBlocks(ctx, peer, keys, maxSize)
}
