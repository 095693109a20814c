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
	// One read's arguments and results, with its poller callback bound
	// once, so that a read allocates no closure.
	p     []byte
	want  int
	n     int
	errno syscall.Errno
	read  func(fd uintptr) bool
}

// NewReader returns a Reader of c, or nil when c has no raw socket (a
// net.Pipe, a TLS connection): the caller then reads c.
func NewReader(c net.Conn) *Reader {
	rc := rawConn(c)
	if rc == nil {
		return nil
	}
	r := &Reader{c: c, rc: rc}
	r.read = r.readFD
	return r
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
	r.p, r.want, r.n, r.errno = p, want, 0, 0
	err := r.rc.Read(r.read)
	n, errno := r.n, r.errno
	r.p = nil // hold on to none of p
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

// readFD is Read's poller callback: false on EAGAIN, to park.
func (r *Reader) readFD(fd uintptr) bool {
	v, e := Syscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
	if e == unix.EAGAIN {
		if r.want != 0 && r.lowat != r.want {
			// Raised only now, with the socket drained, so what was
			// queued is read at once; the kernel wakes the poller if as
			// much arrived meanwhile.
			r.setLowat(fd, r.want)
		}
		return false
	}
	r.n, r.errno = int(v), e
	return true
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
	// One writev's iovecs and results, with its poller callback bound
	// once, so that a write allocates no closure.
	iv    []unix.Iovec
	n     int
	errno syscall.Errno
	write func(fd uintptr) bool
}

// NewWriter returns a Writer of c, or nil when c has no raw socket (a
// net.Pipe, a TLS connection): the caller then writes c.
func NewWriter(c net.Conn) *Writer {
	rc := rawConn(c)
	if rc == nil {
		return nil
	}
	w := &Writer{c: c, rc: rc}
	w.write = w.writeFD
	return w
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
		w.iv, w.n, w.errno = iv, 0, 0
		err := w.rc.Write(w.write)
		n, errno := w.n, w.errno
		clear(iv) // the iovecs point into bufs: hold on to none of them
		w.iv = nil
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

// writeFD is Writev's poller callback: false on EAGAIN, to park.
func (w *Writer) writeFD(fd uintptr) bool {
	v, e := Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.iv[0])), uintptr(len(w.iv)))
	if e == unix.EAGAIN {
		return false
	}
	w.n, w.errno = int(v), e
	return true
}

// Syscall makes a raw system call that cannot block, again while a signal
// interrupts it (EINTR): it does not tell the scheduler, so it neither
// hands off the processor nor wakes sysmon. For calls on non-blocking
// descriptors only.
func Syscall(trap, a1, a2, a3 uintptr) (uintptr, syscall.Errno) {
	for {
		r, _, e := unix.RawSyscall(trap, a1, a2, a3)
		if e != unix.EINTR {
			return r, e
		}
	}
}

// ReadFD and WriteFD are one read or write of a non-blocking descriptor
// whose readiness the caller watches itself, as the RESP event loop does
// with its epoll set: a raw system call, which never blocks on such a
// descriptor and so need not tell the scheduler (a call through
// syscall.Syscall wakes sysmon whenever every P was idle). Errors,
// unix.EAGAIN included, come back as the bare errno.
func ReadFD(fd int, p []byte) (int, error) { return fdIO(unix.SYS_READ, fd, p) }

// WriteFD: see ReadFD.
func WriteFD(fd int, p []byte) (int, error) { return fdIO(unix.SYS_WRITE, fd, p) }

func fdIO(sysno uintptr, fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, e := Syscall(sysno, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
