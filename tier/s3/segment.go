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
//
// Version 2 adds retention classes (docs/retention.md): each entry ends
// with its class (a byte, a tier.Retention) and the class's end (a varint
// of Unix nanoseconds, 0: none), and each tombstone with a kind byte: 0 a
// removal, 1 a class record, followed by the class and its end, that gives
// the block of the older segment that class without rewriting it. A
// segment is written as version 1 when no block in it has a class and it
// carries no class record, so a bucket where no client asked for classes
// reads as before, and a node that predates classes skips a version 2
// segment (ErrFormat) rather than load its blocks without their class.
const (
	trailerSize   = 24
	formatVersion = 1
	// formatClasses is the version whose footer records classes.
	formatClasses = 2
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
	Retention   tier.Retention
	RetainUntil int64 // Unix nanoseconds; 0: the class does not end
}

// tombstone says that Key, as stored in segment Seg, is gone, or, for a
// class record (Class), that it has class Retention until RetainUntil.
type tombstone struct {
	Seg         string
	Key         block.Key
	Class       bool
	Retention   tier.Retention
	RetainUntil int64
}

// version is the format f needs: formatClasses only when it records a
// class.
func (f *footer) version() uint32 {
	for _, e := range f.Entries {
		if e.Retention != tier.RetentionNormal || e.RetainUntil != 0 {
			return formatClasses
		}
	}
	for _, t := range f.Tombs {
		if t.Class {
			return formatClasses
		}
	}
	return formatVersion
}

// footer is a segment's index.
type footer struct {
	Entries []footerEntry
	Tombs   []tombstone
}

// appendFooter appends f's encoding and the trailer to dst.
func appendFooter(dst []byte, f *footer) []byte {
	start := len(dst)
	v := f.version()
	dst = binary.AppendUvarint(dst, uint64(len(f.Entries)))
	for _, e := range f.Entries {
		dst = append(dst, e.Key[:]...)
		dst = binary.AppendUvarint(dst, uint64(e.Off))
		dst = binary.AppendUvarint(dst, uint64(e.Len))
		dst = binary.LittleEndian.AppendUint32(dst, e.CRC)
		dst = binary.AppendVarint(dst, e.PinnedUntil)
		dst = binary.AppendUvarint(dst, uint64(len(e.Meta)))
		dst = append(dst, e.Meta...)
		if v >= formatClasses {
			dst = append(dst, byte(e.Retention))
			dst = binary.AppendVarint(dst, e.RetainUntil)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(f.Tombs)))
	for _, t := range f.Tombs {
		dst = binary.AppendUvarint(dst, uint64(len(t.Seg)))
		dst = append(dst, t.Seg...)
		dst = append(dst, t.Key[:]...)
		if v >= formatClasses {
			if !t.Class {
				dst = append(dst, 0)
				continue
			}
			dst = append(dst, 1, byte(t.Retention))
			dst = binary.AppendVarint(dst, t.RetainUntil)
		}
	}
	body := dst[start:]
	crc := block.Checksum(body)
	n := len(body)
	dst = append(dst, magic[:]...)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(n))
	dst = binary.LittleEndian.AppendUint32(dst, crc)
	dst = binary.LittleEndian.AppendUint32(dst, v)
	return dst
}

// parseTrailer checks the last trailerSize bytes of an object of objSize
// bytes and returns the footer's length, checksum and format version.
func parseTrailer(tr []byte, objSize int64) (n int64, crc, version uint32, err error) {
	if len(tr) != trailerSize {
		return 0, 0, 0, fmt.Errorf("%w: trailer of %d bytes", ErrFormat, len(tr))
	}
	if [8]byte(tr[:8]) != magic {
		return 0, 0, 0, fmt.Errorf("%w: bad magic", ErrFormat)
	}
	version = binary.LittleEndian.Uint32(tr[20:])
	if version != formatVersion && version != formatClasses {
		return 0, 0, 0, fmt.Errorf("%w: version %d", ErrFormat, version)
	}
	fl := binary.LittleEndian.Uint64(tr[8:])
	if objSize < trailerSize || fl > uint64(objSize-trailerSize) {
		return 0, 0, 0, fmt.Errorf("%w: footer of %d bytes in a %d-byte object", ErrFormat, fl, objSize)
	}
	return int64(fl), binary.LittleEndian.Uint32(tr[16:]), version, nil
}

// decodeFooter parses a footer whose blocks lie in the first dataLen bytes
// of its object. It verifies crc and every bound, so a corrupt or hostile
// footer is an error, never a panic or an entry pointing outside the data.
// version is the trailer's.
func decodeFooter(p []byte, crc uint32, dataLen int64, version uint32) (*footer, error) {
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
		if version >= formatClasses {
			e.Retention, e.RetainUntil = d.class()
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
		if version >= formatClasses {
			switch kind := d.bytes(1); {
			case kind == nil:
			case kind[0] == 1:
				t.Class = true
				t.Retention, t.RetainUntil = d.class()
			case kind[0] != 0:
				return nil, fmt.Errorf("%w: tombstone of kind %d", ErrFormat, kind[0])
			}
		}
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

// class reads a class and its end; an unknown class or a negative end is
// a format error, so a hostile footer cannot give a block a class the
// tiers do not know.
func (d *decoder) class() (tier.Retention, int64) {
	b := d.bytes(1)
	until := d.varint()
	if b == nil || d.err != nil {
		return tier.RetentionNormal, 0
	}
	r := tier.Retention(b[0])
	if !r.Valid() || until < 0 {
		d.err = fmt.Errorf("%w: class %d until %d", ErrFormat, b[0], until)
		d.p = nil
		return tier.RetentionNormal, 0
	}
	return r, until
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
