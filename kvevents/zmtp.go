package kvevents

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// ZMTP 3.x framing, as far as the guard needs it (rfc.zeromq.org/spec/23).
const (
	zmtpGreetingLen = 64
	zmtpFlagMore    = 0x01
	zmtpFlagLong    = 0x02
	zmtpFlagCommand = 0x04
	zmtpFlagsKnown  = zmtpFlagMore | zmtpFlagLong | zmtpFlagCommand
	// zmtpMaxCommand bounds one command frame (READY with its metadata,
	// PING, SUBSCRIBE): a few hundred bytes in practice. It must stay below
	// the guard's read buffer, which holds a whole command before any of it
	// is passed on.
	zmtpMaxCommand = 16 << 10
	// zmtpBufSize is the guard's read buffer: a whole event message of
	// three frames usually arrives in one read.
	zmtpBufSize = 64 << 10
)

// FrameLimits bound what a ZMQ peer may send on one connection. The ZMQ
// library allocates each frame at the size its header claims, before the
// bytes arrive; a peer that claims 2^62 bytes would end the process, and
// frames of 100 MB behind a slow consumer would hold gigabytes. The guard
// checks every header against these limits first and drops the connection
// that breaks one.
type FrameLimits struct {
	// MaxFrameBytes bounds one frame's body.
	MaxFrameBytes int64
	// MaxMessageBytes bounds the frames of one multipart message together.
	MaxMessageBytes int64
	// MaxFrames bounds the frames of one message (each costs the library
	// a slice header even when empty).
	MaxFrames int
}

func (l FrameLimits) valid() bool {
	return l.MaxFrameBytes > 0 && l.MaxMessageBytes >= l.MaxFrameBytes && l.MaxFrames > 0
}

// zmtpGuard reads a peer's ZMTP stream through a buffer and hands bytes on
// only once the frame they belong to has been checked: a frame header is
// passed on whole after its size is checked, a command frame whole after
// its contents are (the library indexes a command's name and READY's
// metadata without bounds checks), and a data frame's body as it comes.
// It never allocates at a size the peer chose.
//
// A zmtpGuard is not safe for concurrent use; the library reads each
// connection from one goroutine.
type zmtpGuard struct {
	r   *bufio.Reader
	lim FrameLimits
	// peerTypes are the socket types the peer may announce in READY; nil
	// allows any.
	peerTypes []string
	// onReady is called once, when the peer's READY has been checked: the
	// handshake cannot fail any more but for I/O.
	onReady func()

	greeting int    // greeting bytes still to pass on
	pass     int    // checked bytes (a header, a command) still to pass on
	body     uint64 // data-frame body bytes still to pass on
	more     bool   // the current message continues
	msgBytes int64  // body bytes of the current message so far
	frames   int    // frames of the current message so far
	greeted  bool
	ready    bool
	err      error // sticky: once broken, always broken
}

// newZMTPGuard returns a guard reading from r.
func newZMTPGuard(r io.Reader, lim FrameLimits, peerTypes []string, onReady func()) *zmtpGuard {
	return &zmtpGuard{r: bufio.NewReaderSize(r, zmtpBufSize), lim: lim, peerTypes: peerTypes, onReady: onReady, greeting: zmtpGreetingLen}
}

// Read implements io.Reader.
func (g *zmtpGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var err error
	switch {
	case g.greeting > 0:
		if g.greeting == zmtpGreetingLen && !g.greeted {
			// The library sends its own greeting before it reads, so a
			// peer that waits for it (libzmq sends its greeting in parts)
			// has it already.
			b, err := g.r.Peek(zmtpGreetingLen)
			if err != nil {
				return 0, err
			}
			if err := checkGreeting(b); err != nil {
				return 0, g.fail(err)
			}
			g.greeted = true
		}
		n, err = g.r.Read(p[:min(len(p), g.greeting)])
		g.greeting -= n
	case g.pass > 0:
		n, err = g.r.Read(p[:min(len(p), g.pass)])
		g.pass -= n
	case g.body > 0:
		n, err = g.r.Read(p[:int(min(uint64(len(p)), g.body))])
		g.body -= uint64(n)
	default:
		if err := g.header(); err != nil {
			return 0, err
		}
		return g.Read(p)
	}
	return n, err
}

// header peeks at the next frame, checks it, and sets what may be passed
// on. It consumes nothing.
func (g *zmtpGuard) header() error {
	b, err := g.r.Peek(2)
	if err != nil {
		return err
	}
	flags := b[0]
	if flags&^zmtpFlagsKnown != 0 {
		return g.fail(fmt.Errorf("%w: reserved flag bits %#x", ErrFrame, flags))
	}
	hlen := 2
	size := uint64(b[1])
	if flags&zmtpFlagLong != 0 {
		hlen = 9
		if b, err = g.r.Peek(9); err != nil {
			return err
		}
		size = binary.BigEndian.Uint64(b[1:9])
	}
	if flags&zmtpFlagCommand != 0 {
		if flags&zmtpFlagMore != 0 || g.more {
			return g.fail(fmt.Errorf("%w: command frame inside a message", ErrFrame))
		}
		if size > zmtpMaxCommand {
			return g.fail(fmt.Errorf("%w: command of %d bytes, limit %d", ErrFrameTooLarge, size, zmtpMaxCommand))
		}
		whole, err := g.r.Peek(hlen + int(size))
		if err != nil {
			return err
		}
		name, err := checkCommand(whole[hlen:], g.ready, g.peerTypes)
		if err != nil {
			return g.fail(err)
		}
		if !g.ready && name != "READY" {
			return g.fail(fmt.Errorf("%w: handshake command %q, want READY", ErrFrame, name))
		}
		g.pass = hlen + int(size)
		if !g.ready {
			g.ready = true
			if g.onReady != nil {
				g.onReady()
			}
		}
		return nil
	}
	if !g.ready {
		return g.fail(fmt.Errorf("%w: a message before the handshake", ErrFrame))
	}
	if size > uint64(g.lim.MaxFrameBytes) {
		return g.fail(fmt.Errorf("%w: frame of %d bytes, limit %d", ErrFrameTooLarge, size, g.lim.MaxFrameBytes))
	}
	if !g.more {
		g.msgBytes, g.frames = 0, 0
	}
	g.msgBytes += int64(size)
	g.frames++
	if g.msgBytes > g.lim.MaxMessageBytes {
		return g.fail(fmt.Errorf("%w: message of %d bytes or more, limit %d", ErrFrameTooLarge, g.msgBytes, g.lim.MaxMessageBytes))
	}
	if g.frames > g.lim.MaxFrames {
		return g.fail(fmt.Errorf("%w: message of more than %d frames", ErrFrameTooLarge, g.lim.MaxFrames))
	}
	g.more = flags&zmtpFlagMore != 0
	g.pass, g.body = hlen, size
	return nil
}

func (g *zmtpGuard) fail(err error) error {
	g.err = err
	return err
}

// checkGreeting checks a peer's greeting as the library will, so that a
// connection the guard lets through cannot fail its handshake but for I/O
// (the library then leaves it open): ZMTP 3.0 or later, the NULL
// mechanism, an as-server flag of 0 or 1.
func checkGreeting(b []byte) error {
	switch {
	case b[0] != 0xFF || b[9] != 0x7F:
		return fmt.Errorf("%w: not a ZMTP 3 greeting", ErrFrame)
	case b[10] < 3:
		return fmt.Errorf("%w: ZMTP version %d.%d, want 3.0 or later", ErrFrame, b[10], b[11])
	case string(bytes.TrimRight(b[12:32], "\x00")) != "NULL":
		return fmt.Errorf("%w: security mechanism %q, want NULL", ErrFrame, bytes.TrimRight(b[12:32], "\x00"))
	case b[32] > 1:
		return fmt.Errorf("%w: as-server flag %d", ErrFrame, b[32])
	}
	return nil
}

// checkCommand checks a command frame's body as the library will read it:
// a name of its stated length, and for the handshake's READY, metadata
// properties that each fit (the library indexes them without bounds
// checks) with a Socket-Type among peerTypes. It returns the name.
func checkCommand(c []byte, ready bool, peerTypes []string) (string, error) {
	if len(c) == 0 || int(c[0]) > len(c)-1 {
		return "", fmt.Errorf("%w: command name overruns its frame", ErrFrame)
	}
	name, body := string(c[1:1+int(c[0])]), c[1+int(c[0]):]
	if name != "READY" || ready {
		return name, nil
	}
	socketType := ""
	for len(body) > 0 {
		k := int(body[0])
		if 1+k+4 > len(body) {
			return "", fmt.Errorf("%w: READY property name overruns its frame", ErrFrame)
		}
		v := binary.BigEndian.Uint32(body[1+k:])
		if uint64(v) > uint64(len(body)-(1+k+4)) {
			return "", fmt.Errorf("%w: READY property value overruns its frame", ErrFrame)
		}
		if zmtpTitle(string(body[1:1+k])) == "Socket-Type" {
			socketType = string(body[1+k+4 : 1+k+4+int(v)])
		}
		body = body[1+k+4+int(v):]
	}
	if peerTypes != nil && !slices.Contains(peerTypes, socketType) {
		return "", fmt.Errorf("%w: peer socket type %q, want one of %v", ErrFrame, socketType, peerTypes)
	}
	return name, nil
}

// isTimeout reports whether err is a deadline passing.
func isTimeout(err error) bool {
	t, ok := err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

// zmtpTitle is how the library names a READY property: its first letters
// of words upper-cased, the rest as sent. The guard must find the socket
// type under the same name the library will, or a type it never checked
// reaches the library's, which panics on one it does not know.
func zmtpTitle(k string) string {
	return cases.Title(language.Und, cases.NoLower).String(k)
}
