package resp

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/internal/rawsock"
)

// A connection served by its own goroutine reads and writes its socket with
// raw system calls through the runtime's poller (syscall.RawConn): the
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
	rc syscall.RawConn
	r  *rawsock.Reader
	of net.Conn // the net.Conn rc belongs to: nc changes when an event loop hands the connection over
}

// raw returns the connection's RawConn, or nil where it has none (a
// net.Pipe in tests): the caller then uses nc.
func (c *conn) raw() syscall.RawConn {
	if c.rs.of == c.nc {
		return c.rs.rc
	}
	c.rs = rawSock{of: c.nc}
	if sc, ok := c.nc.(interface {
		SyscallConn() (syscall.RawConn, error)
	}); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			c.rs.rc = rc
			c.rs.r = rawsock.NewReader(c.nc)
		}
	}
	return c.rs.rc
}

// readSock reads from the socket into p, as net.Conn's Read does.
func (c *conn) readSock(p []byte) (int, error) {
	if c.raw() == nil || c.rs.r == nil {
		return c.nc.Read(p)
	}
	return c.rs.r.Read(p)
}

// writeSock writes bufs to the socket, all of them unless it fails, as
// net.Buffers' WriteTo does, and returns the bytes written.
func (c *conn) writeSock(bufs [][]byte) (int64, error) {
	rc := c.raw()
	if rc == nil {
		nb := net.Buffers(bufs)
		return nb.WriteTo(c.nc)
	}
	var iov [4]unix.Iovec
	var total int64
	for len(bufs) > 0 {
		iv := iov[:0]
		for _, b := range bufs {
			if len(b) == 0 {
				continue
			}
			if len(iv) == len(iov) {
				break
			}
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			iv = append(iv, v)
		}
		if len(iv) == 0 {
			break
		}
		var n int
		var errno syscall.Errno
		err := rc.Write(func(fd uintptr) bool {
			for {
				r, _, e := unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iv[0])), uintptr(len(iv)))
				switch e {
				case unix.EINTR:
					continue
				case unix.EAGAIN:
					return false
				}
				n, errno = int(r), e
				return true
			}
		})
		if err != nil {
			return total, err
		}
		if errno != 0 {
			return total, &net.OpError{Op: "writev", Net: "tcp", Source: c.nc.LocalAddr(), Addr: c.nc.RemoteAddr(), Err: os.NewSyscallError("writev", errno)}
		}
		if n == 0 {
			return total, io.ErrShortWrite
		}
		total += int64(n)
		for n > 0 {
			k := min(n, len(bufs[0]))
			bufs[0] = bufs[0][k:]
			n -= k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return total, nil
}
