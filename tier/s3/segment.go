package s3

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// A segment object holds many blocks, so one PUT carries many demotions:
//
//	[value 0][value 1]...[footer][trailer]
//
// The footer lists the blocks (key, offset, length, CRC-32C, pin, meta) and
// the tombstones this segment carries: blocks of earlier segments that were
// deleted or evicted, so that a restart does not bring them back. The
// trailer is fixed-size, at the very end, so a reader finds the footer with
// two ranged GETs knowing only the object's size:
//
//	magic "YBS3SEG1" | footer length u64 | footer CRC-32C u32 | version u32
//
// All integers little-endian; inside the footer, lengths and offsets are
// uvarints and a pin is a varint of Unix nanoseconds (0: none).
const (
	trailerSize   = 24
	formatVersion = 1
	// maxNameLen bounds a tombstone's segment name, far above the names
	// this package makes, so a corrupt footer cannot ask for a huge slice.
	maxNameLen = 1024
)

var magic = [8]byte{'Y', 'B', 'S', '3', 'S', 'E', 'G', '1'}

// footerEntry is one block of a segment, as its footer records it.
type footerEntry struct {
	Key         block.Key
	Off, Len    int64
	CRC         uint32
	PinnedUntil int64 // Unix nanoseconds; 0 when not pinned
	Meta        []byte
}

// tombstone says that Key, as stored in segment Seg, is gone.
type tombstone struct {
	Seg string
	Key block.Key
}

// footer is a segment's index.
type footer struct {
	Entries []footerEntry
	Tombs   []tombstone
}

// appendFooter appends f's encoding and the trailer to dst.
func appendFooter(dst []byte, f *footer) []byte {
	start := len(dst)
	dst = binary.AppendUvarint(dst, uint64(len(f.Entries)))
	for _, e := range f.Entries {
		dst = append(dst, e.Key[:]...)
		dst = binary.AppendUvarint(dst, uint64(e.Off))
		dst = binary.AppendUvarint(dst, uint64(e.Len))
		dst = binary.LittleEndian.AppendUint32(dst, e.CRC)
		dst = binary.AppendVarint(dst, e.PinnedUntil)
		dst = binary.AppendUvarint(dst, uint64(len(e.Meta)))
		dst = append(dst, e.Meta...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(f.Tombs)))
	for _, t := range f.Tombs {
		dst = binary.AppendUvarint(dst, uint64(len(t.Seg)))
		dst = append(dst, t.Seg...)
		dst = append(dst, t.Key[:]...)
	}
	body := dst[start:]
	crc := block.Checksum(body)
	n := len(body)
	dst = append(dst, magic[:]...)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(n))
	dst = binary.LittleEndian.AppendUint32(dst, crc)
	dst = binary.LittleEndian.AppendUint32(dst, formatVersion)
	return dst
}

// parseTrailer checks the last trailerSize bytes of an object of objSize
// bytes and returns the footer's length and checksum.
func parseTrailer(tr []byte, objSize int64) (n int64, crc uint32, err error) {
	if len(tr) != trailerSize {
		return 0, 0, fmt.Errorf("%w: trailer of %d bytes", ErrFormat, len(tr))
	}
	if [8]byte(tr[:8]) != magic {
		return 0, 0, fmt.Errorf("%w: bad magic", ErrFormat)
	}
	if v := binary.LittleEndian.Uint32(tr[20:]); v != formatVersion {
		return 0, 0, fmt.Errorf("%w: version %d", ErrFormat, v)
	}
	fl := binary.LittleEndian.Uint64(tr[8:])
	if objSize < trailerSize || fl > uint64(objSize-trailerSize) {
		return 0, 0, fmt.Errorf("%w: footer of %d bytes in a %d-byte object", ErrFormat, fl, objSize)
	}
	return int64(fl), binary.LittleEndian.Uint32(tr[16:]), nil
}

// decodeFooter parses a footer whose blocks lie in the first dataLen bytes
// of its object. It verifies crc and every bound, so a corrupt or hostile
// footer is an error, never a panic or an entry pointing outside the data.
func decodeFooter(p []byte, crc uint32, dataLen int64) (*footer, error) {
	if block.Checksum(p) != crc {
		return nil, fmt.Errorf("%w: footer checksum mismatch", ErrFormat)
	}
	d := decoder{p: p}
	n := d.uvarint()
	// Each entry takes at least 32+1+1+4+1+1 bytes: bound the count by
	// what is left, so a huge count cannot allocate.
	if n > uint64(len(p))/40 {
		return nil, fmt.Errorf("%w: %d entries in a %d-byte footer", ErrFormat, n, len(p))
	}
	f := &footer{Entries: make([]footerEntry, 0, n)}
	for range n {
		var e footerEntry
		copy(e.Key[:], d.bytes(32))
		off, ln := d.uvarint(), d.uvarint()
		e.CRC = d.u32()
		e.PinnedUntil = d.varint()
		ml := d.uvarint()
		if d.err != nil {
			break
		}
		if ml > tier.MaxMeta {
			return nil, fmt.Errorf("%w: %d bytes of metadata", ErrFormat, ml)
		}
		if m := d.bytes(int(ml)); ml > 0 && m != nil {
			e.Meta = append([]byte(nil), m...)
		}
		if off > uint64(dataLen) || ln > uint64(dataLen)-off {
			return nil, fmt.Errorf("%w: block [%d, +%d) outside %d bytes of data", ErrFormat, off, ln, dataLen)
		}
		e.Off, e.Len = int64(off), int64(ln)
		f.Entries = append(f.Entries, e)
	}
	nt := d.uvarint()
	if d.err == nil && nt > uint64(len(p))/33 {
		return nil, fmt.Errorf("%w: %d tombstones in a %d-byte footer", ErrFormat, nt, len(p))
	}
	for i := uint64(0); i < nt && d.err == nil; i++ {
		nl := d.uvarint()
		if nl > maxNameLen {
			return nil, fmt.Errorf("%w: segment name of %d bytes", ErrFormat, nl)
		}
		var t tombstone
		t.Seg = string(d.bytes(int(nl)))
		copy(t.Key[:], d.bytes(32))
		f.Tombs = append(f.Tombs, t)
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.p) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes in footer", ErrFormat, len(d.p))
	}
	return f, nil
}

type decoder struct {
	p   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: footer truncated", ErrFormat)
	}
	d.p = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.p)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) u32() uint32 {
	b := d.bytes(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (d *decoder) bytes(n int) []byte {
	if n < 0 || n > len(d.p) {
		d.fail()
		return nil
	}
	b := d.p[:n]
	d.p = d.p[n:]
	return b
}

func pinTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func pinNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
