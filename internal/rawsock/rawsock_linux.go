package rawsock

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// LowatMin is the shortest read that raises SO_RCVLOWAT: shorter ones
	// are heads and small bodies, which must be answered as soon as they
	// arrive.
	LowatMin = 128 << 10
	// LowatMax bounds SO_RCVLOWAT. The kernel grows the receive buffer to
	// about twice it, so this bounds what one socket may hold for a value in
	// flight.
	LowatMax = 4 << 20
)

// Reader reads one connection's socket. It is not safe for concurrent use,
// as a net.Conn's reads from one goroutine are.
type Reader struct {
	c     net.Conn
	rc    syscall.RawConn
	lowat int // SO_RCVLOWAT as last set; 0 for the kernel's default of 1
}

// NewReader returns a Reader of c, or nil when c has no raw socket (a
// net.Pipe, a TLS connection): the caller then reads c.
func NewReader(c net.Conn) *Reader {
	sc, ok := c.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &Reader{c: c, rc: rc}
}

// Read reads from the socket into p, as net.Conn's Read does, deadlines
// included.
func (r *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return r.c.Read(p)
	}
	want := 0
	if len(p) >= LowatMin {
		want = min(len(p), LowatMax)
	}
	if want == 0 && r.lowat != 0 {
		// The long read is over: the next may be a few bytes.
		r.rc.Control(func(fd uintptr) { r.setLowat(fd, 0) })
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			v, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				if want != 0 && r.lowat != want {
					// Raised only now, with the socket drained, so what was
					// queued is read at once; the kernel wakes the poller if
					// as much arrived meanwhile.
					r.setLowat(fd, want)
				}
				return false
			}
			n, errno = int(v), e
			return true
		}
	})
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: r.c.LocalAddr(), Addr: r.c.RemoteAddr(), Err: os.NewSyscallError("read", errno)}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Reset sets SO_RCVLOWAT back to the kernel's default, before the socket is
// read by other code.
func (r *Reader) Reset() {
	if r.lowat != 0 {
		r.rc.Control(func(fd uintptr) { r.setLowat(fd, 0) })
	}
}

// setLowat sets SO_RCVLOWAT to v (0 for the default). A refusal leaves it
// as it was: reads still work, with more wake-ups.
func (r *Reader) setLowat(fd uintptr, v int) {
	if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, max(v, 1)); err == nil {
		r.lowat = v
	}
}
