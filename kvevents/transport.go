package kvevents

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// bufTCP is the name under which the subscriber's TCP transport is
// registered with zmq4.
const bufTCP = "yuebing-tcp"

// bufTCPOnce registers bufTCP once per process.
var bufTCPOnce = sync.OnceValue(func() error {
	return zmq4.RegisterTransport(bufTCP, bufferedTCP{transport.New("tcp")})
})

// bufferedTCP is zmq4's TCP transport with reads buffered. zmq4 reads each
// frame's header and body with separate unbuffered reads, six system calls
// for an event message of three frames; through a buffer one read takes a
// whole message, or several when they queue up.
type bufferedTCP struct{ transport.Transport }

// Dial implements transport.Transport.
func (t bufferedTCP) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := t.Transport.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	return &bufConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// bufConn reads through a buffer; everything else is the connection's.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// bufferedEndpoint returns a "tcp://" endpoint under the buffered
// transport, or the endpoint as it is if the transport could not be
// registered.
func bufferedEndpoint(ep string) string {
	if bufTCPOnce() != nil {
		return ep
	}
	if rest, ok := strings.CutPrefix(ep, "tcp://"); ok {
		return bufTCP + "://" + rest
	}
	return ep
}
