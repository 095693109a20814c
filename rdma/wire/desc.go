package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/yuebing/yuebing/rdma"
)

// MaxNICs bounds each NIC list of a descriptor.
const MaxNICs = 16

// Descriptor is the payload of OpenOK: what a peer needs to use a segment.
// Layout (little-endian): size (8), largest slice accepted (4), then the
// strings name, location, each with a 1-byte length, then the preferred and
// the secondary NIC addresses, each list a 1-byte count of 1-byte-length
// strings.
type Descriptor struct {
	Size      uint64
	MaxSlice  uint32
	Name      string
	Location  string
	Preferred []string
	Secondary []string
}

// Append encodes d after dst. It panics on a descriptor that does not fit
// the limits, since the owner builds it from validated state.
func (d Descriptor) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, d.Size)
	dst = binary.LittleEndian.AppendUint32(dst, d.MaxSlice)
	dst = appendString(dst, d.Name)
	dst = appendString(dst, d.Location)
	for _, list := range [][]string{d.Preferred, d.Secondary} {
		if len(list) > MaxNICs {
			panic("BUG: wire: descriptor lists too many NICs")
		}
		dst = append(dst, byte(len(list)))
		for _, s := range list {
			dst = appendString(dst, s)
		}
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	if len(s) > 255 {
		panic("BUG: wire: descriptor string over 255 bytes")
	}
	return append(append(dst, byte(len(s))), s...)
}

// ParseDescriptor decodes an OpenOK payload. It rejects trailing bytes, a
// zero size, empty strings and lists over MaxNICs.
func ParseDescriptor(b []byte) (Descriptor, error) {
	var d Descriptor
	if len(b) < 12 {
		return d, fmt.Errorf("%w: descriptor of %d bytes", rdma.ErrProtocol, len(b))
	}
	d.Size = binary.LittleEndian.Uint64(b)
	d.MaxSlice = binary.LittleEndian.Uint32(b[8:])
	if d.Size == 0 || d.MaxSlice == 0 {
		return Descriptor{}, fmt.Errorf("%w: descriptor with zero size or slice limit", rdma.ErrProtocol)
	}
	r := reader{b: b[12:]}
	d.Name = r.str()
	d.Location = r.str()
	d.Preferred = r.list()
	d.Secondary = r.list()
	switch {
	case r.err != nil:
		return Descriptor{}, r.err
	case len(r.b) != 0:
		return Descriptor{}, fmt.Errorf("%w: %d bytes after descriptor", rdma.ErrProtocol, len(r.b))
	case d.Name == "" || d.Location == "":
		return Descriptor{}, fmt.Errorf("%w: descriptor without name or location", rdma.ErrProtocol)
	}
	return d, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() int {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 1 {
		r.err = fmt.Errorf("%w: truncated descriptor", rdma.ErrProtocol)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return int(c)
}

func (r *reader) str() string {
	n := r.byte()
	if r.err != nil {
		return ""
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("%w: truncated descriptor string", rdma.ErrProtocol)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) list() []string {
	n := r.byte()
	if n > MaxNICs {
		r.err = fmt.Errorf("%w: descriptor lists %d NICs, at most %d", rdma.ErrProtocol, n, MaxNICs)
	}
	var out []string
	for i := 0; i < n && r.err == nil; i++ {
		s := r.str()
		if s == "" && r.err == nil {
			r.err = fmt.Errorf("%w: empty NIC address", rdma.ErrProtocol)
		}
		out = append(out, s)
	}
	return out
}
