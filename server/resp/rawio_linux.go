package resp

import (
	"net"

	"github.com/yuebing/yuebing/internal/rawsock"
)

// A connection served by its own goroutine reads and writes its socket with
// raw system calls through the runtime's poller (internal/rawsock): the
// socket is non-blocking, so read and writev never wait, they only copy
// what the socket holds or has room for. Through net.Conn the runtime marks
// each call as one that may block, and a call that copies megabytes (a SET
// of a 4 MiB value read straight into its block, a GET's writev of it)
// outlasts the scheduler's 20 µs check: the runtime then hands the
// goroutine's processor to another thread and takes it back afterwards,
// a few futex wake-ups and context switches per call. Without them, and
// with the low-water mark below, a 1 MiB SET cost 185 µs of the server's
// CPU instead of 326 and a GET 325 instead of 406 (docs/benchmarks.md).
//
// While a long value streams in, internal/rawsock raises the socket's
// SO_RCVLOWAT to the bytes still to come, so the poller wakes the goroutine
// once that much is queued instead of at every segment's arrival: a 4 MiB
// SET took 18.5 reads, 5.4 of them finding nothing, and now takes 8, 1.9
// of them empty.

// rawSock is a connection's socket as raw system calls see it.
type rawSock struct {
	r  *rawsock.Reader
	w  *rawsock.Writer
	of net.Conn // the net.Conn r and w belong to: nc changes when an event loop hands the connection over
}

// raw makes c.rs the raw socket of c.nc; its r and w are nil where nc has
// none (a net.Pipe in tests), and the caller then uses nc.
func (c *conn) raw() {
	if c.rs.of != c.nc {
		c.rs = rawSock{of: c.nc, r: rawsock.NewReader(c.nc), w: rawsock.NewWriter(c.nc)}
	}
}

// readSock reads from the socket into p, as net.Conn's Read does.
func (c *conn) readSock(p []byte) (int, error) {
	if c.raw(); c.rs.r == nil {
		return c.nc.Read(p)
	}
	return c.rs.r.Read(p)
}

// writeSock writes bufs to the socket, all of them unless it fails, as
// net.Buffers' WriteTo does, and returns the bytes written.
func (c *conn) writeSock(bufs [][]byte) (int64, error) {
	if c.raw(); c.rs.w == nil {
		nb := net.Buffers(bufs)
		return nb.WriteTo(c.nc)
	}
	return c.rs.w.Writev(bufs)
}
