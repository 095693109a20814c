package cluster

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/wire"
	"github.com/yuebing/yuebing/tier"
)

var _ rdma.BlockSource = (*Node)(nil)

// PinBlock implements rdma.BlockSource: the transfer service serves this
// node's blocks to other nodes' reads by key from here, straight from the
// pinned copy (the DRAM arena's own memory for a block held there).
func (n *Node) PinBlock(ctx context.Context, k block.Key) (rdma.PinnedBlock, bool) {
	h, _, err := n.store.GetLocal(ctx, k)
	if err != nil {
		// The reader was told this node holds it: tell the leader what it
		// does hold.
		n.rep.touch(k)
		return rdma.PinnedBlock{}, false
	}
	var (
		pinned, retainUntil int64
		meta                []byte
		class               tier.Retention
	)
	if info, _, err := n.store.Stat(k); err == nil {
		meta = info.Meta
		if !info.PinnedUntil.IsZero() {
			pinned = info.PinnedUntil.Unix()
		}
		class, retainUntil = info.Retention, unixOrZero(info.RetainUntil)
	}
	n.stats.served.Add(1)
	n.stats.serving.Add(1)
	return rdma.PinnedBlock{Data: h.Bytes(), Checksum: h.Checksum(), Attr: encodeClassAttr(pinned, class, retainUntil, meta), Release: func() {
		h.Release()
		n.stats.serving.Add(-1)
	}}, true
}

// A block's attribute on the transfer service is its pin, then its record:
//
//	pinned-until  8 bytes, little-endian Unix seconds (0: not pinned)
//	meta          the rest: the block's record, opaque here
const attrPinSize = 8

func encodeAttr(pinnedUntil int64, meta []byte) []byte {
	if len(meta) > wire.MaxBlockAttr-attrPinSize {
		meta = nil
	}
	b := make([]byte, attrPinSize, attrPinSize+len(meta))
	binary.LittleEndian.PutUint64(b, uint64(max(pinnedUntil, 0)))
	return append(b, meta...)
}

func decodeAttr(b []byte) (pinnedUntil int64, meta []byte, err error) {
	if len(b) < attrPinSize {
		return 0, nil, fmt.Errorf("%w: block attribute of %d bytes", ErrBadRequest, len(b))
	}
	pinnedUntil = int64(binary.LittleEndian.Uint64(b))
	if pinnedUntil < 0 {
		return 0, nil, fmt.Errorf("%w: negative pin %d", ErrBadRequest, pinnedUntil)
	}
	if len(b) > attrPinSize {
		meta = b[attrPinSize:]
	}
	return pinnedUntil, meta, nil
}
