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
	rc := rawConn(c)
	if rc == nil {
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
	// Raw as well: unix.SetsockoptInt goes through syscall.Syscall, whose
	// entersyscall wakes sysmon when every processor was idle, twice a
	// long read (docs/benchmarks.md, "Raw socket writes and the put
	// connection"). setsockopt never blocks.
	val := int32(max(v, 1))
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT, uintptr(unsafe.Pointer(&val)), unsafe.Sizeof(val), 0)
	if e == 0 {
		r.lowat = v
	}
}

// Writer writes one connection's socket with raw non-blocking writev
// calls. It is not safe for concurrent use.
type Writer struct {
	c   net.Conn
	rc  syscall.RawConn
	iov [4]unix.Iovec
	one [1][]byte
}

// NewWriter returns a Writer of c, or nil when c has no raw socket (a
// net.Pipe, a TLS connection): the caller then writes c.
func NewWriter(c net.Conn) *Writer {
	rc := rawConn(c)
	if rc == nil {
		return nil
	}
	return &Writer{c: c, rc: rc}
}

func rawConn(c net.Conn) syscall.RawConn {
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
	return rc
}

// Write writes p whole unless it fails, as net.Conn's Write does,
// deadlines included.
func (w *Writer) Write(p []byte) (int, error) {
	w.one[0] = p
	n, err := w.Writev(w.one[:])
	w.one[0] = nil
	return int(n), err
}

// Writev writes bufs, all of them unless it fails, as net.Buffers' WriteTo
// does, and returns the bytes written. It consumes bufs' elements as it
// goes: after a failure they hold what was not written. A full socket
// parks the goroutine in the runtime's poller until there is room or the
// write deadline passes; a write that took only part resumes where it
// stopped.
func (w *Writer) Writev(bufs [][]byte) (int64, error) {
	var total int64
	for len(bufs) > 0 {
		iv := w.iov[:0]
		for _, b := range bufs {
			if len(b) == 0 {
				continue
			}
			if len(iv) == len(w.iov) {
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
		err := w.rc.Write(func(fd uintptr) bool {
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
		clear(iv) // the iovecs point into bufs: hold on to none of them
		if err != nil {
			return total, err
		}
		if errno != 0 {
			return total, &net.OpError{Op: "writev", Net: "tcp", Source: w.c.LocalAddr(), Addr: w.c.RemoteAddr(), Err: os.NewSyscallError("writev", errno)}
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

// ReadFD and WriteFD are one read or write of a non-blocking descriptor
// whose readiness the caller watches itself, as the RESP event loop does
// with its epoll set: a raw system call, which never blocks on such a
// descriptor and so need not tell the scheduler (a call through
// syscall.Syscall wakes sysmon whenever every P was idle). Errors,
// unix.EAGAIN and unix.EINTR included, come back as the bare errno.
func ReadFD(fd int, p []byte) (int, error) { return fdIO(unix.SYS_READ, fd, p) }

// WriteFD: see ReadFD.
func WriteFD(fd int, p []byte) (int, error) { return fdIO(unix.SYS_WRITE, fd, p) }

func fdIO(sysno uintptr, fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(sysno, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
