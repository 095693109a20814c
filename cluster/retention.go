package cluster

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma/wire"
	"github.com/yuebing/yuebing/tier"
)

// A block of a retention class other than normal (docs/retention.md) has
// an attribute of a second form, so that a replica copied from it keeps
// its class:
//
//	pinned-until | 1<<63  8 bytes, little-endian; the top bit marks the form
//	class                 1 byte, a tier.Retention
//	retain-until          8 bytes, little-endian Unix seconds (0: no end)
//	meta                  the rest, as in the plain form
//
// The plain form refuses a first word with the top bit set (a negative
// pin), so a node that predates classes refuses such a block instead of
// storing it without its class. Normal blocks keep the plain form.
const (
	attrClassFlag = uint64(1) << 63
	attrClassSize = attrPinSize + 1 + 8
)

// encodeClassAttr is encodeAttr with the block's class.
func encodeClassAttr(pinnedUntil int64, r tier.Retention, retainUntil int64, meta []byte) []byte {
	if r == tier.RetentionNormal {
		return encodeAttr(pinnedUntil, meta)
	}
	if len(meta) > wire.MaxBlockAttr-attrClassSize {
		meta = nil
	}
	b := make([]byte, attrClassSize, attrClassSize+len(meta))
	binary.LittleEndian.PutUint64(b, uint64(max(pinnedUntil, 0))|attrClassFlag)
	b[attrPinSize] = byte(r)
	binary.LittleEndian.PutUint64(b[attrPinSize+1:], uint64(max(retainUntil, 0)))
	return append(b, meta...)
}

// decodeClassAttr reads either form; the plain one is of class normal.
func decodeClassAttr(b []byte) (pinnedUntil int64, r tier.Retention, retainUntil int64, meta []byte, err error) {
	if len(b) < attrPinSize || binary.LittleEndian.Uint64(b)&attrClassFlag == 0 {
		pinnedUntil, meta, err = decodeAttr(b)
		return pinnedUntil, tier.RetentionNormal, 0, meta, err
	}
	if len(b) < attrClassSize {
		return 0, 0, 0, nil, fmt.Errorf("%w: block attribute of %d bytes with a class", ErrBadRequest, len(b))
	}
	pinnedUntil = int64(binary.LittleEndian.Uint64(b) &^ attrClassFlag)
	r = tier.Retention(b[attrPinSize])
	retainUntil = int64(binary.LittleEndian.Uint64(b[attrPinSize+1:]))
	if !r.Valid() || r == tier.RetentionNormal || retainUntil < 0 {
		return 0, 0, 0, nil, fmt.Errorf("%w: block attribute with class %d until %d", ErrBadRequest, b[attrPinSize], retainUntil)
	}
	if len(b) > attrClassSize {
		meta = b[attrClassSize:]
	}
	return pinnedUntil, r, retainUntil, meta, nil
}

// unixOrZero is t in Unix seconds, 0 for the zero time.
func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// ReplicaAccount is told of the replicas the leader places on this node and
// drops from it, so that the server charges a hard-pinned replica to this
// node's pin quota when it arrives (docs/retention.md). Both methods must
// be quick and safe for concurrent use.
type ReplicaAccount interface {
	// AdmitReplica is asked before a replica of key, described by info,
	// is stored. An error refuses it: the leader's copy fails and it
	// places the replica on another node. Otherwise done is called once,
	// with whether the block was stored.
	AdmitReplica(key block.Key, info tier.BlockInfo) (done func(stored bool), err error)
	// DroppedReplica is told that the leader dropped key's replica here.
	DroppedReplica(key block.Key)
}

// SetReplicaAccount makes the node consult a on every replica it receives
// or drops; nil stops it.
func (n *Node) SetReplicaAccount(a ReplicaAccount) {
	if a == nil {
		n.replica.Store(nil)
		return
	}
	n.replica.Store(&a)
}

// admitReplica asks the ReplicaAccount, if any, to admit a replica.
func (n *Node) admitReplica(key block.Key, info tier.BlockInfo) (func(bool), error) {
	if a := n.replica.Load(); a != nil {
		return (*a).AdmitReplica(key, info)
	}
	return func(bool) {}, nil
}

// droppedReplica tells the ReplicaAccount, if any, of a dropped replica.
func (n *Node) droppedReplica(key block.Key) {
	if a := n.replica.Load(); a != nil {
		(*a).DroppedReplica(key)
	}
}
