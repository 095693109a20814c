package server

import (
	"encoding/binary"
	"fmt"

	"github.com/yuebing/yuebing/tier"
)

// Block metadata written by the HTTP API, stored with every block it puts
// (tier.PutOptions.Meta) so that reads can tell whose block it is.
//
// Layout, little-endian:
//
//	0     kind    'H' (HTTP blocks; other front ends use other kinds)
//	1     version 1
//	2     flags   bit 0: an object name follows the namespace
//	3:5   u16     namespace length N
//	5:5+N         namespace
//	then, with flag bit 0:
//	      u16     name length M
//	      M bytes the object's raw name
//
// The leading kind byte keeps records of different front ends apart: a
// record of another kind is never mistaken for one of ours.
const (
	metaKind    = 'H'
	metaVersion = 1
	metaHasName = 1 << 0
	metaFixed   = 5 // kind, version, flags, namespace length
)

// maxMetaText is how many bytes of namespace and object name fit in one
// record: the tier's limit less the fixed fields.
const maxMetaText = tier.MaxMeta - metaFixed - 2

// blockMeta is what the API records about a block.
type blockMeta struct {
	Namespace string
	Name      string // raw name of an opaque-keyed object; "" for chained keys
	HasName   bool
}

// encodeMeta returns the record for m, or an error wrapping ErrBadRequest
// when the namespace and name do not fit.
func encodeMeta(m blockMeta) ([]byte, error) {
	n := metaFixed + len(m.Namespace)
	if m.HasName {
		n += 2 + len(m.Name)
	}
	if n > tier.MaxMeta {
		return nil, fmt.Errorf("%w: namespace and object name are %d bytes together, at most %d fit", ErrBadRequest, len(m.Namespace)+len(m.Name), maxMetaText)
	}
	b := make([]byte, 0, n)
	flags := byte(0)
	if m.HasName {
		flags |= metaHasName
	}
	b = append(b, metaKind, metaVersion, flags)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(m.Namespace)))
	b = append(b, m.Namespace...)
	if m.HasName {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(m.Name)))
		b = append(b, m.Name...)
	}
	return b, nil
}

// decodeMeta parses a record. ok is false for anything that is not a
// well-formed record of this kind and version, including records of other
// front ends and blocks stored with no metadata.
func decodeMeta(b []byte) (m blockMeta, ok bool) {
	if len(b) < metaFixed || b[0] != metaKind || b[1] != metaVersion || b[2]&^metaHasName != 0 {
		return m, false
	}
	n := int(binary.LittleEndian.Uint16(b[3:5]))
	rest := b[metaFixed:]
	if len(rest) < n {
		return m, false
	}
	m.Namespace, rest = string(rest[:n]), rest[n:]
	if b[2]&metaHasName != 0 {
		if len(rest) < 2 {
			return blockMeta{}, false
		}
		l := int(binary.LittleEndian.Uint16(rest))
		rest = rest[2:]
		if len(rest) < l {
			return blockMeta{}, false
		}
		m.Name, m.HasName, rest = string(rest[:l]), true, rest[l:]
	}
	if len(rest) != 0 {
		return blockMeta{}, false
	}
	return m, true
}
