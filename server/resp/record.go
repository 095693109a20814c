package resp

import (
	"encoding/binary"
	"errors"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// A Redis key's block carries a record in its PutOptions.Meta, so that the
// key table can be rebuilt from the store after a restart (SSD blocks
// survive one, with their Meta). Layout, integers big-endian:
//
//	0      'R'        kind: a RESP key (the HTTP API's blocks use 'H')
//	1      1          version
//	2      flags      flagPaired
//	3..10  gen        the key's generation (see blockKey)
//	11..18 expireAt   deadline in Unix milliseconds, 0 for none
//	19..   uvarint len(namespace), namespace, then the key's bytes
const (
	recordKind    = 'R'
	recordVersion = 1
	recordHeader  = 19

	// flagPaired marks an LMCache "<k>metadata" key written while its
	// "<k>kv_bytes" payload was stored: it lives only as long as the payload.
	flagPaired = 1 << 0
)

var errRecord = errors.New("resp: not a RESP key record")

type record struct {
	flags    uint8
	gen      uint64
	expireAt int64
	ns       string
	name     string
}

func (r *record) appendTo(b []byte) []byte {
	b = append(b, recordKind, recordVersion, r.flags)
	b = binary.BigEndian.AppendUint64(b, r.gen)
	b = binary.BigEndian.AppendUint64(b, uint64(r.expireAt))
	b = binary.AppendUvarint(b, uint64(len(r.ns)))
	b = append(b, r.ns...)
	return append(b, r.name...)
}

// recordLen is the length of the record of a key.
func recordLen(ns string, name int) int {
	return recordHeader + uvarintLen(uint64(len(ns))) + len(ns) + name
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// maxKeyLen is the longest key a namespace can hold: its record must fit
// tier.MaxMeta.
func maxKeyLen(ns string) int { return tier.MaxMeta - recordLen(ns, 0) }

func parseRecord(b []byte) (record, error) {
	var r record
	if len(b) < recordHeader+1 || b[0] != recordKind || b[1] != recordVersion {
		return r, errRecord
	}
	r.flags = b[2]
	r.gen = binary.BigEndian.Uint64(b[3:])
	r.expireAt = int64(binary.BigEndian.Uint64(b[11:]))
	n, k := binary.Uvarint(b[recordHeader:])
	rest := b[recordHeader:]
	if k <= 0 || n > uint64(len(rest)-k) || r.expireAt < 0 {
		return r, errRecord
	}
	rest = rest[k:]
	r.ns, r.name = string(rest[:n]), string(rest[n:])
	if block.ValidateNamespace(r.ns) != nil {
		return r, errRecord
	}
	return r, nil
}

// RecordNamespace returns the namespace of a RESP key's block from its
// Meta, and false for a block that is not a RESP key's: how the node
// charges a restarted or replicated hard pin to the namespace that made it.
func RecordNamespace(meta []byte) (string, bool) {
	r, err := parseRecord(meta)
	return r.ns, err == nil
}

// blockKey is the block that holds generation gen of key name:
// block.OpaqueKey(ns, gen as 8 bytes big-endian || name). The namespace
// keeps tenants apart; the generation lets a SET write the new value beside
// the old one and switch readers over when it is complete, so neither
// concurrent SETs of one key nor GETs of it wait for each other.
func blockKey(ns string, name []byte, gen uint64) block.Key {
	raw := make([]byte, 8, 8+len(name))
	binary.BigEndian.PutUint64(raw, gen)
	return block.OpaqueKey(ns, append(raw, name...))
}
