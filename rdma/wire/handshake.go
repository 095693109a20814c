package wire

import (
	"fmt"
	"io"

	"github.com/yuebing/yuebing/rdma"
)

// ClientHello authenticates to a peer: it sends Hello with token and the
// versions we speak, and returns the version the peer chose. r must read
// from the same connection w writes to.
func ClientHello(w io.Writer, r io.Reader, token []byte) (uint8, error) {
	hello := HelloMsg{Min: MinVersion, Max: MaxVersion, Token: token}
	if err := WriteFrame(w, Header{Version: MaxVersion, Type: Hello}, hello.Append(nil)); err != nil {
		return 0, fmt.Errorf("hello: %w", err)
	}
	h, err := ReadHeader(r, make([]byte, HeaderSize))
	if err != nil {
		if err == io.EOF {
			err = fmt.Errorf("%w: peer closed the connection during hello", rdma.ErrProtocol)
		}
		return 0, fmt.Errorf("hello: %w", err)
	}
	p, err := ReadControl(r, h, MaxMessage)
	switch {
	case err != nil:
		return 0, err
	case h.Type == Error:
		return 0, PeerError(h, p)
	case h.Type != HelloOK || len(p) != 0:
		return 0, fmt.Errorf("%w: %s frame in answer to hello", rdma.ErrProtocol, h.Type)
	case h.Version < MinVersion || h.Version > MaxVersion:
		return 0, fmt.Errorf("%w: peer chose version %d", rdma.ErrVersion, h.Version)
	}
	return h.Version, nil
}

// ServerHello reads a peer's Hello, checks its token and versions, and
// answers HelloOK with the chosen version. On a failure that the peer
// should hear about (a wrong token, no common version, a malformed hello)
// it sends an Error frame before returning the error; the caller then
// closes the connection.
func ServerHello(w io.Writer, r io.Reader, token []byte) (uint8, error) {
	v, err := serverHello(w, r, token)
	if err != nil && (isAny(err, rdma.ErrProtocol, rdma.ErrAuth, rdma.ErrVersion)) {
		WriteError(w, Version, 0, err)
	}
	return v, err
}

func serverHello(w io.Writer, r io.Reader, token []byte) (uint8, error) {
	h, err := ReadHeader(r, make([]byte, HeaderSize))
	if err != nil {
		return 0, fmt.Errorf("hello: %w", err)
	}
	if h.Type != Hello {
		return 0, fmt.Errorf("%w: %s frame before hello", rdma.ErrProtocol, h.Type)
	}
	p, err := ReadControl(r, h, MaxHello)
	if err != nil {
		return 0, err
	}
	m, err := ParseHello(p)
	if err != nil {
		return 0, err
	}
	if !TokenEqual(m.Token, token) {
		return 0, fmt.Errorf("%w: wrong cluster token", rdma.ErrAuth)
	}
	v, err := Negotiate(m)
	if err != nil {
		return 0, err
	}
	return v, WriteFrame(w, Header{Version: v, Type: HelloOK}, nil)
}
