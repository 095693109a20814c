package wire

import (
	"fmt"
	"io"

	"github.com/yuebing/yuebing/rdma"
)

// Conn is what a handshake establishes.
type Conn struct {
	// Version is the agreed protocol version.
	Version uint8
	// ID is the server's name for the connection (HelloOK carries it in the
	// segment field), what a Fence names. Zero from servers that do not
	// take part in fencing, such as shm's.
	ID uint64
	// Session is the client's session (server side only).
	Session uint64
}

// ClientHello authenticates to a peer: it sends Hello with token, session
// and the versions we speak, and returns the connection the peer agreed
// to. r must read from the same connection w writes to.
func ClientHello(w io.Writer, r io.Reader, token []byte, session uint64) (Conn, error) {
	hello := HelloMsg{Min: MinVersion, Max: MaxVersion, Session: session, Token: token}
	if err := WriteFrame(w, Header{Version: MaxVersion, Type: Hello}, hello.Append(nil)); err != nil {
		return Conn{}, fmt.Errorf("hello: %w", err)
	}
	h, err := ReadHeader(r, make([]byte, HeaderSize))
	if err != nil {
		if err == io.EOF {
			err = fmt.Errorf("%w: peer closed the connection during hello", rdma.ErrProtocol)
		}
		return Conn{}, fmt.Errorf("hello: %w", err)
	}
	p, err := ReadControl(r, h, MaxMessage)
	switch {
	case err != nil:
		return Conn{}, err
	case h.Type == Error:
		return Conn{}, PeerError(h, p)
	case h.Type != HelloOK || len(p) != 0:
		return Conn{}, fmt.Errorf("%w: %s frame in answer to hello", rdma.ErrProtocol, h.Type)
	case h.Version < MinVersion || h.Version > MaxVersion:
		return Conn{}, fmt.Errorf("%w: peer chose version %d", rdma.ErrVersion, h.Version)
	}
	return Conn{Version: h.Version, ID: h.Segment, Session: session}, nil
}

// ServerHello reads a peer's Hello, checks its token and versions, and
// answers HelloOK with the chosen version and the connection's id. On a
// failure that the peer should hear about (a wrong token, no common
// version, a malformed hello) it sends an Error frame before returning the
// error; the caller then closes the connection.
func ServerHello(w io.Writer, r io.Reader, token []byte, id uint64) (Conn, error) {
	c, err := serverHello(w, r, token, id)
	if err != nil && (isAny(err, rdma.ErrProtocol, rdma.ErrAuth, rdma.ErrVersion)) {
		WriteError(w, Version, 0, err)
	}
	return c, err
}

func serverHello(w io.Writer, r io.Reader, token []byte, id uint64) (Conn, error) {
	h, err := ReadHeader(r, make([]byte, HeaderSize))
	if err != nil {
		return Conn{}, fmt.Errorf("hello: %w", err)
	}
	if h.Type != Hello {
		return Conn{}, fmt.Errorf("%w: %s frame before hello", rdma.ErrProtocol, h.Type)
	}
	p, err := ReadControl(r, h, MaxHello)
	if err != nil {
		return Conn{}, err
	}
	m, err := ParseHello(p)
	if err != nil {
		return Conn{}, err
	}
	if !TokenEqual(m.Token, token) {
		return Conn{}, fmt.Errorf("%w: wrong cluster token", rdma.ErrAuth)
	}
	v, err := Negotiate(m)
	if err != nil {
		return Conn{}, err
	}
	return Conn{Version: v, ID: id, Session: m.Session}, WriteFrame(w, Header{Version: v, Type: HelloOK, Segment: id}, nil)
}
