package cluster

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// A report is what a node sends the leader: the current state of the blocks
// that changed since its last report (or, in a full resync, of every block
// it holds), the hits it counted, and its figures. Reports are binary:
// thousands of 32-byte keys a second are cheaper to frame than to quote.
//
//	header   48 bytes: magic "YBR1", flags u16, 0 u16, node u32,
//	         records u32, hits u32, load u32 (millionths), term u64,
//	         capacity u64, free u64
//	records  records x 48 bytes: key [32], tiers u8 (a TierMask; 0: the
//	         node no longer holds it), desired u8 (replica count, 0 the
//	         default), 0 u16, pinned-until u32 (Unix seconds, 0 none),
//	         size u64
//	hits     hits x 48 bytes: key [32], count u32, 0 u32, size u64
//	trailer  CRC-32C of everything before it, u32
//
// All integers are little-endian. A record states what the node holds now,
// not what happened, so a report applied twice, or after a later one that
// failed, leaves the same state: the leader diffs it against its index.
const (
	reportMagic      = "YBR1"
	reportHeaderSize = 48
	recordSize       = 48
	hitSize          = 48
	trailerSize      = 4
)

// Report flags.
const (
	// flagFullBegin starts a full resync: the leader forgets what it knew of
	// the node and takes this report's records as the first of its state.
	flagFullBegin = 1 << iota
	// flagFullEnd ends a full resync: the node's state is complete and
	// deltas may follow.
	flagFullEnd
	flagsKnown = flagFullBegin | flagFullEnd
)

// MaxReportRecords bounds the records, and separately the hits, of one
// report, so a report is at most about 5 MiB to buffer.
const MaxReportRecords = 1 << 16

// Record is the state of one block on the reporting node.
type Record struct {
	Key block.Key
	// Tiers holds the block's tiers on the node; 0 means it holds none.
	Tiers index.TierMask
	// Desired is the replica count the node knows for the block, 0 when it
	// knows none (the default, 1).
	Desired uint8
	// PinnedUntil is the block's soft pin in Unix seconds, 0 when unpinned.
	PinnedUntil uint32
	// Size is the block's length in bytes, 0 if unknown.
	Size uint64
}

// Hit is a block's accesses on the node since its last report.
type Hit struct {
	Key   block.Key
	Count uint32
	// Size is the block's length, as the reader saw it: the leader needs
	// it to place a replica of a hot block it knew nothing else about.
	Size uint64
}

// report is one decoded report.
type report struct {
	Flags    uint16
	Node     uint32
	Term     uint64
	Capacity uint64
	Free     uint64
	// Load is the node's busyness, 0 idle to 1 saturated.
	Load    float64
	Records []Record
	Hits    []Hit
}

func (r *report) full() bool { return r.Flags&flagFullBegin != 0 }

// appendReport encodes r onto dst.
func appendReport(dst []byte, r *report) []byte {
	start := len(dst)
	var h [reportHeaderSize]byte
	copy(h[0:4], reportMagic)
	binary.LittleEndian.PutUint16(h[4:], r.Flags)
	binary.LittleEndian.PutUint32(h[8:], r.Node)
	binary.LittleEndian.PutUint32(h[12:], uint32(len(r.Records)))
	binary.LittleEndian.PutUint32(h[16:], uint32(len(r.Hits)))
	binary.LittleEndian.PutUint32(h[20:], loadMillionths(r.Load))
	binary.LittleEndian.PutUint64(h[24:], r.Term)
	binary.LittleEndian.PutUint64(h[32:], r.Capacity)
	binary.LittleEndian.PutUint64(h[40:], r.Free)
	dst = append(dst, h[:]...)
	var rec [recordSize]byte
	for i := range r.Records {
		x := &r.Records[i]
		copy(rec[0:32], x.Key[:])
		rec[32] = byte(x.Tiers)
		rec[33] = x.Desired
		binary.LittleEndian.PutUint16(rec[34:], 0)
		binary.LittleEndian.PutUint32(rec[36:], x.PinnedUntil)
		binary.LittleEndian.PutUint64(rec[40:], x.Size)
		dst = append(dst, rec[:]...)
	}
	var hit [hitSize]byte
	for i := range r.Hits {
		copy(hit[0:32], r.Hits[i].Key[:])
		binary.LittleEndian.PutUint32(hit[32:], r.Hits[i].Count)
		binary.LittleEndian.PutUint32(hit[36:], 0)
		binary.LittleEndian.PutUint64(hit[40:], r.Hits[i].Size)
		dst = append(dst, hit[:]...)
	}
	return appendChecksum(dst, start)
}

// appendChecksum appends the trailer: the CRC-32C of dst[start:].
func appendChecksum(dst []byte, start ...int) []byte {
	s := 0
	if len(start) > 0 {
		s = start[0]
	}
	return binary.LittleEndian.AppendUint32(dst, block.Checksum(dst[s:]))
}

func loadMillionths(l float64) uint32 {
	switch {
	case !(l > 0): // NaN too
		return 0
	case l >= math.MaxUint32/1e6:
		return math.MaxUint32
	}
	return uint32(math.Round(l * 1e6))
}

// decodeReport parses a report, checking every length and the checksum
// before it trusts a field. It never panics.
func decodeReport(b []byte) (*report, error) {
	if len(b) < reportHeaderSize+trailerSize {
		return nil, fmt.Errorf("%w: report of %d bytes is shorter than its header", ErrBadReport, len(b))
	}
	if string(b[0:4]) != reportMagic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrBadReport, b[0:4])
	}
	body := b[:len(b)-trailerSize]
	if got, want := block.Checksum(body), binary.LittleEndian.Uint32(b[len(b)-trailerSize:]); got != want {
		return nil, fmt.Errorf("%w: checksum %08x, trailer says %08x", ErrBadReport, got, want)
	}
	r := &report{
		Flags:    binary.LittleEndian.Uint16(b[4:]),
		Node:     binary.LittleEndian.Uint32(b[8:]),
		Term:     binary.LittleEndian.Uint64(b[24:]),
		Capacity: binary.LittleEndian.Uint64(b[32:]),
		Free:     binary.LittleEndian.Uint64(b[40:]),
		Load:     float64(binary.LittleEndian.Uint32(b[20:])) / 1e6,
	}
	if r.Flags&^flagsKnown != 0 || binary.LittleEndian.Uint16(b[6:]) != 0 {
		return nil, fmt.Errorf("%w: unknown flags %#x", ErrBadReport, binary.LittleEndian.Uint32(b[4:]))
	}
	nrec := uint64(binary.LittleEndian.Uint32(b[12:]))
	nhit := uint64(binary.LittleEndian.Uint32(b[16:]))
	if nrec > MaxReportRecords || nhit > MaxReportRecords {
		return nil, fmt.Errorf("%w: %d records and %d hits, at most %d each", ErrBadReport, nrec, nhit, MaxReportRecords)
	}
	if want := reportHeaderSize + nrec*recordSize + nhit*hitSize + trailerSize; uint64(len(b)) != want {
		return nil, fmt.Errorf("%w: %d bytes for %d records and %d hits, want %d", ErrBadReport, len(b), nrec, nhit, want)
	}
	p := body[reportHeaderSize:]
	r.Records = make([]Record, nrec)
	for i := range r.Records {
		x := &r.Records[i]
		copy(x.Key[:], p[0:32])
		x.Tiers = index.TierMask(p[32])
		x.Desired = p[33]
		if binary.LittleEndian.Uint16(p[34:]) != 0 {
			return nil, fmt.Errorf("%w: record %d: reserved bytes set", ErrBadReport, i)
		}
		x.PinnedUntil = binary.LittleEndian.Uint32(p[36:])
		x.Size = binary.LittleEndian.Uint64(p[40:])
		p = p[recordSize:]
	}
	r.Hits = make([]Hit, nhit)
	for i := range r.Hits {
		copy(r.Hits[i].Key[:], p[0:32])
		r.Hits[i].Count = binary.LittleEndian.Uint32(p[32:])
		if binary.LittleEndian.Uint32(p[36:]) != 0 {
			return nil, fmt.Errorf("%w: hit %d: reserved bytes set", ErrBadReport, i)
		}
		r.Hits[i].Size = binary.LittleEndian.Uint64(p[40:])
		p = p[hitSize:]
	}
	return r, nil
}
