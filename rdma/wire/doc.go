// Package wire is the binary framing that the rdma transports speak: a fixed
// 44-byte header (checksummed, so garbage is rejected before any field is
// trusted), optional payload with its own CRC-32C, the handshake that
// authenticates a peer with the cluster token and negotiates a version, and
// the segment descriptor a peer returns when a segment is opened.
//
// Every decoder checks declared lengths against fixed limits before it
// allocates, so a peer can make us buffer at most MaxControl bytes per
// control frame; data payloads are never buffered here at all, the
// transports read them straight into registered memory.
//
//	var b [wire.HeaderSize]byte
//	h := wire.Header{Version: wire.Version, Type: wire.Read, ID: 7, Segment: seg, Offset: 0, Length: 65536}
//	h.Put(b[:])
//	got, err := wire.ParseHeader(b[:]) // got == h
//
// The byte layout is specified in docs/transfer.md.
package wire
