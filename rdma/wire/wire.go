package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma"
)

// HeaderSize is the encoded size of a Header.
const HeaderSize = 44

// Protocol versions this package speaks. A frame's version byte must be the
// version negotiated in the handshake; the header layout itself never
// changes, so any version can read a Hello. Version 2 adds Get and Block:
// blocks read by key.
const (
	MinVersion = 1
	MaxVersion = 2
	Version    = MaxVersion
)

// MaxControl bounds the payload of every frame that is not data (hello,
// open, descriptor, error): a peer can make us buffer no more than this.
const MaxControl = 8 << 10

// MaxMessage bounds the text of an Error frame.
const MaxMessage = 256

// magic opens every frame ("YT"), so a peer speaking something else fails on
// its first bytes.
const magic0, magic1 = 'Y', 'T'

// Type is a frame type.
type Type uint8

// Frame types. The numbers are part of the protocol; never reuse one.
const (
	Hello    Type = 1 // client: versions and token
	HelloOK  Type = 2 // server: the chosen version
	Error    Type = 3 // either: code and message for request ID (0: the connection)
	Open     Type = 4 // client: segment name
	OpenOK   Type = 5 // server: segment descriptor
	Read     Type = 6 // client: send Length bytes at Segment+Offset
	ReadData Type = 7 // server: the bytes of a Read
	Write    Type = 8 // client: store the payload at Segment+Offset
	WriteOK  Type = 9 // server: the Write landed and its CRC matched
	// Fence (client) names, in the segment field, an earlier connection of
	// the same session: the server closes it and waits until it is not
	// writing into memory, before it reads the next frame of this one. A
	// client sends it before resubmitting a Write whose connection broke,
	// so that bytes of the old attempt can never land after the new one.
	Fence Type = 10
	// Get (client, version 2) names blocks by key in its payload; the
	// server answers one Block frame per key, in order.
	Get Type = 11
	// Block (server, version 2) answers one key of a Get: found or not
	// held, the block's CRC-32C and attribute, then its bytes (see
	// BlockHead).
	Block Type = 12
)

// KeysSince is the first version that speaks Get and Block.
const KeysSince = 2

func (t Type) String() string {
	names := [...]string{"", "hello", "hello-ok", "error", "open", "open-ok", "read", "read-data", "write", "write-ok", "fence", "get", "block"}
	if int(t) < len(names) && t != 0 {
		return names[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Code is the error code of an Error frame.
type Code uint16

// Codes. The numbers are part of the protocol; never reuse one.
const (
	CodeProtocol   Code = 1
	CodeAuth       Code = 2
	CodeVersion    Code = 3
	CodeNotFound   Code = 4
	CodeOutOfRange Code = 5
	CodeChecksum   Code = 6
	CodeNotShared  Code = 7
	CodeBusy       Code = 8
)

// codeErrs maps codes to sentinels, in the order CodeOf tries them.
var codeErrs = []struct {
	code Code
	err  error
}{
	{CodeAuth, rdma.ErrAuth},
	{CodeVersion, rdma.ErrVersion},
	{CodeNotFound, rdma.ErrSegmentNotFound},
	{CodeOutOfRange, rdma.ErrOutOfRange},
	{CodeChecksum, rdma.ErrChecksum},
	{CodeNotShared, rdma.ErrNotShared},
	{CodeBusy, rdma.ErrBusy},
	{CodeProtocol, rdma.ErrProtocol},
}

// Err returns the rdma sentinel for a code; unknown codes are protocol
// errors.
func (c Code) Err() error {
	for _, ce := range codeErrs {
		if ce.code == c {
			return ce.err
		}
	}
	return rdma.ErrProtocol
}

func isAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// CodeOf returns the code that carries err to a peer.
func CodeOf(err error) Code {
	for _, ce := range codeErrs {
		if errors.Is(err, ce.err) {
			return ce.code
		}
	}
	return CodeProtocol
}

// Header is the fixed part of every frame. Layout (little-endian):
//
//	0   2  magic "YT"
//	2   1  version
//	3   1  type
//	4   2  code (Error frames; 0 otherwise)
//	6   2  flags (0 in version 1)
//	8   4  length: payload bytes that follow, or for Read the bytes asked for
//	12  4  CRC-32C of a control payload (0 without payload, and 0 for data
//	       frames, whose CRC follows the payload: see TrailerSize)
//	16  8  request ID, echoed in the answer
//	24  8  segment ID
//	32  8  offset in the segment
//	40  4  CRC-32C of bytes 0..39
type Header struct {
	Version uint8
	Type    Type
	Code    Code
	Flags   uint16
	Length  uint32
	CRC     uint32
	ID      uint64
	Segment uint64
	Offset  uint64
}

// Put encodes h into b[:HeaderSize].
func (h *Header) Put(b []byte) {
	_ = b[HeaderSize-1]
	b[0], b[1], b[2], b[3] = magic0, magic1, h.Version, byte(h.Type)
	binary.LittleEndian.PutUint16(b[4:], uint16(h.Code))
	binary.LittleEndian.PutUint16(b[6:], h.Flags)
	binary.LittleEndian.PutUint32(b[8:], h.Length)
	binary.LittleEndian.PutUint32(b[12:], h.CRC)
	binary.LittleEndian.PutUint64(b[16:], h.ID)
	binary.LittleEndian.PutUint64(b[24:], h.Segment)
	binary.LittleEndian.PutUint64(b[32:], h.Offset)
	binary.LittleEndian.PutUint32(b[40:], block.Checksum(b[:40]))
}

// ParseHeader decodes and verifies a header: magic, header CRC, known type,
// zero flags. Errors wrap rdma.ErrProtocol.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: header is %d bytes, want %d", rdma.ErrProtocol, len(b), HeaderSize)
	}
	if b[0] != magic0 || b[1] != magic1 {
		return Header{}, fmt.Errorf("%w: bad magic %#x", rdma.ErrProtocol, b[:2])
	}
	if got, want := block.Checksum(b[:40]), binary.LittleEndian.Uint32(b[40:]); got != want {
		return Header{}, fmt.Errorf("%w: header CRC %08x, want %08x", rdma.ErrProtocol, got, want)
	}
	h := Header{
		Version: b[2],
		Type:    Type(b[3]),
		Code:    Code(binary.LittleEndian.Uint16(b[4:])),
		Flags:   binary.LittleEndian.Uint16(b[6:]),
		Length:  binary.LittleEndian.Uint32(b[8:]),
		CRC:     binary.LittleEndian.Uint32(b[12:]),
		ID:      binary.LittleEndian.Uint64(b[16:]),
		Segment: binary.LittleEndian.Uint64(b[24:]),
		Offset:  binary.LittleEndian.Uint64(b[32:]),
	}
	if h.Type < Hello || h.Type > Block {
		return Header{}, fmt.Errorf("%w: unknown frame type %d", rdma.ErrProtocol, h.Type)
	}
	if h.Flags != 0 {
		return Header{}, fmt.Errorf("%w: unknown flags %#x", rdma.ErrProtocol, h.Flags)
	}
	return h, nil
}

// ReadHeader reads and parses one header; buf must hold HeaderSize bytes. A
// stream that ends inside a header is a protocol error; one that ends
// before it returns io.EOF.
func ReadHeader(r io.Reader, buf []byte) (Header, error) {
	buf = buf[:HeaderSize]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.ErrUnexpectedEOF {
			return Header{}, fmt.Errorf("%w: truncated header", rdma.ErrProtocol)
		}
		return Header{}, err
	}
	return ParseHeader(buf)
}

// ReadControl reads the payload of a control frame, at most limit (and never
// more than MaxControl) bytes, and checks its CRC.
func ReadControl(r io.Reader, h Header, limit int) ([]byte, error) {
	limit = min(limit, MaxControl)
	if int64(h.Length) > int64(limit) {
		return nil, fmt.Errorf("%w: %s payload of %d bytes, at most %d", rdma.ErrProtocol, h.Type, h.Length, limit)
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w: truncated %s payload", rdma.ErrProtocol, h.Type)
		}
		return nil, err
	}
	if got := block.Checksum(p); got != h.CRC {
		return nil, fmt.Errorf("%w: %s payload CRC %08x, want %08x", rdma.ErrProtocol, h.Type, got, h.CRC)
	}
	return p, nil
}

// WriteFrame writes a control frame, h and payload, filling in Length and
// CRC. It uses writev, so payload is not copied. Data frames go through
// WriteData.
func WriteFrame(w io.Writer, h Header, payload []byte) error {
	if h.Type.IsData() {
		return WriteData(w, h, payload)
	}
	if uint64(len(payload)) > 1<<32-1 {
		panic("BUG: wire: payload over 4 GiB")
	}
	h.Length = uint32(len(payload))
	h.CRC = 0
	if len(payload) > 0 {
		h.CRC = block.Checksum(payload)
	}
	var b [HeaderSize]byte
	h.Put(b[:])
	if len(payload) == 0 {
		_, err := w.Write(b[:])
		return err
	}
	bufs := net.Buffers{b[:], payload}
	_, err := bufs.WriteTo(w)
	return err
}

// WriteError sends an Error frame for request id (0: the whole connection).
func WriteError(w io.Writer, version uint8, id uint64, err error) error {
	msg := err.Error()
	if len(msg) > MaxMessage {
		msg = msg[:MaxMessage]
	}
	return WriteFrame(w, Header{Version: version, Type: Error, Code: CodeOf(err), ID: id}, []byte(msg))
}

// PeerError turns a received Error frame into an error that wraps the
// code's sentinel. The peer's text is untrusted: it is cut to MaxMessage and
// stripped of anything but printable ASCII before it reaches a log.
func PeerError(h Header, msg []byte) error {
	if len(msg) > MaxMessage {
		msg = msg[:MaxMessage]
	}
	clean := make([]byte, 0, len(msg))
	for _, c := range msg {
		if c >= 0x20 && c < 0x7f {
			clean = append(clean, c)
		} else {
			clean = append(clean, '?')
		}
	}
	return fmt.Errorf("%w (peer: %q)", h.Code.Err(), clean)
}
