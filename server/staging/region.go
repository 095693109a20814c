package staging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/internal/rawsock"
)

// Registered regions: a client maps its own memory from a memfd, passes
// the descriptor on its session's socket with the line
// {"op":"register","size":N} (SCM_RIGHTS, in the same sendmsg), and the
// server maps it too. Requests then name byte ranges of the region
// (Session.Region) and the server copies blocks straight into the client's
// buffer, or stores them straight out of it: no staging copy on either
// side. {"op":"unregister","region":ID} unmaps one; the session's end
// unmaps them all.
//
// The region is the client's memory: the client may change it at any time,
// and nothing the server does with it can reach other memory. Its size is
// checked against the file (a file shorter than the region would make the
// server's copies fault) and the file must be sealed against shrinking
// (F_SEAL_SHRINK), so it cannot be cut short under a copy either.

// maxFDs bounds the descriptors one read of the session socket takes:
// more than the client needs for one request; the kernel closes the rest.
const maxFDs = 4

// region is one client buffer registered in a session: a reference to
// the server's mapping of its file.
type region struct {
	mem []byte
	m   *mapping
}

// mapping is the server's one mapping of a client's memfd, shared by every
// session that registers the same file at the same size: an engine's
// buffer registered on each of its sessions is mapped (and its page tables
// filled) once, not once per session, and counted once against
// MaxRegionBytes. Guarded by Server.mu.
type mapping struct {
	key  mapKey
	mem  []byte
	refs int
}

// mapKey names a file: the descriptor's device and inode, and the size
// mapped.
type mapKey struct {
	dev, ino uint64
	size     int64
}

// fdConn reads a session's socket, keeping the descriptors that arrive
// with its bytes, in order, for the register requests they go with.
type fdConn struct {
	c *net.UnixConn
	// rc, when set, reads with raw non-blocking recvmsg calls (Read);
	// nil reads through c.ReadMsgUnix.
	rc  syscall.RawConn
	oob []byte
	// fds are descriptors received and not yet claimed, at most max:
	// older ones are closed to make room (a client that sends
	// descriptors without requests cannot pile them up here).
	fds []int
	max int
	// recvmsg's arguments and results, in the struct so that one Read
	// allocates nothing: recv is bound once, not a closure per call.
	msg   unix.Msghdr
	iov   unix.Iovec
	recv  func(fd uintptr) bool
	n     int
	errno syscall.Errno
}

func newFDConn(c *net.UnixConn, maxKept int) *fdConn {
	f := &fdConn{c: c, oob: make([]byte, unix.CmsgSpace(maxFDs*4)), max: maxKept}
	if rc, err := c.SyscallConn(); err == nil {
		f.rc = rc
		f.recv = f.recvmsg
	}
	return f
}

// recvmsg is rc.Read's callback: false on EAGAIN, to park in the poller.
func (f *fdConn) recvmsg(fd uintptr) bool {
	// MSG_CMSG_CLOEXEC as ReadMsgUnix: no descriptor taken here leaks
	// into a child process even for an instant.
	v, e := rawsock.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&f.msg)), unix.MSG_CMSG_CLOEXEC)
	if e == unix.EAGAIN {
		return false
	}
	f.n, f.errno = int(v), e
	return true
}

func (f *fdConn) Read(p []byte) (int, error) {
	if f.rc == nil || len(p) == 0 {
		n, oobn, _, _, err := f.c.ReadMsgUnix(p, f.oob)
		if oobn > 0 {
			f.keep(f.oob[:oobn])
		}
		return max(n, 0), err
	}
	// Through ReadMsgUnix every read is a syscall.Syscall, whose
	// entersyscall wakes sysmon when every processor was idle: once per
	// request on a latency-bound session, which then pays sysmon's 20 µs
	// polling (docs/benchmarks.md, "Shared-memory sessions: raw system
	// calls"). The socket is non-blocking, so recvmsg never waits: on
	// EAGAIN the goroutine parks in the poller, where deadlines and Close
	// reach it as they reach ReadMsgUnix.
	f.iov.Base = &p[0]
	f.iov.SetLen(len(p))
	f.msg = unix.Msghdr{Iov: &f.iov, Iovlen: 1, Control: &f.oob[0]}
	f.msg.SetControllen(len(f.oob))
	f.n, f.errno = 0, 0
	err := f.rc.Read(f.recv)
	f.iov.Base = nil // hold on to none of p
	n, errno, oobn := f.n, f.errno, int(f.msg.Controllen)
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, &net.OpError{Op: "read", Net: "unix", Source: f.c.LocalAddr(), Addr: f.c.RemoteAddr(), Err: os.NewSyscallError("recvmsg", errno)}
	}
	if oobn > 0 {
		f.keep(f.oob[:min(oobn, len(f.oob))])
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (f *fdConn) keep(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			f.fds = append(f.fds, fd)
			if len(f.fds) > f.max {
				unix.Close(f.fds[0])
				f.fds = f.fds[1:]
			}
		}
	}
}

// take returns the oldest unclaimed descriptor, or -1.
func (f *fdConn) take() int {
	if len(f.fds) == 0 {
		return -1
	}
	fd := f.fds[0]
	f.fds = f.fds[1:]
	return fd
}

func (f *fdConn) close() {
	for _, fd := range f.fds {
		unix.Close(fd)
	}
	f.fds = nil
}

// regionOp is a register or unregister request.
type regionOp struct {
	Op     string `json:"op"`
	Size   int64  `json:"size"`
	Region uint32 `json:"region"`
}

type regionAnswer struct {
	Region uint32       `json:"region,omitempty"`
	Size   int64        `json:"size,omitempty"`
	Error  *answerError `json:"error,omitempty"`
}

// regionRequest answers line if it is a register or unregister request;
// ok is false for any other request (Options.Handle's).
func (s *Server) regionRequest(f *fdConn, sess *Session, line []byte) (out []byte, ok bool) {
	// Cheap test first: every request passes here.
	if !bytes.Contains(line, []byte(`register"`)) {
		return nil, false
	}
	var op regionOp
	if json.Unmarshal(line, &op) != nil || (op.Op != "register" && op.Op != "unregister") {
		return nil, false
	}
	var ans regionAnswer
	var err error
	if op.Op == "register" {
		ans.Region, err = s.register(sess, f.take(), op.Size)
		ans.Size = op.Size
	} else {
		err = s.unregister(sess, op.Region)
	}
	if err != nil {
		code := "bad_request"
		if errors.Is(err, ErrLimit) {
			code = "overloaded"
		}
		ans = regionAnswer{Error: &answerError{Code: code, Message: err.Error()}}
	}
	out, _ = json.Marshal(ans)
	return out, true
}

// register maps the client's descriptor fd (closed here in every case) as
// a region of size bytes of sess.
func (s *Server) register(sess *Session, fd int, size int64) (uint32, error) {
	if fd < 0 {
		return 0, fmt.Errorf("%w: a register request carries the region's descriptor (SCM_RIGHTS, in the same message)", ErrBadRegion)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrBadRegion, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return 0, fmt.Errorf("%w: the descriptor is not a memory file (memfd)", ErrBadRegion)
	case size <= 0 || size > st.Size:
		return 0, fmt.Errorf("%w: size %d: want 1 to the file's %d bytes", ErrBadRegion, size, st.Size)
	case int64(int(size)) != size:
		return 0, fmt.Errorf("%w: size %d", ErrBadRegion, size)
	}
	// Only shmem (what memfd_create makes): a hugetlbfs file could run
	// out of huge pages under a copy, which faults instead of failing.
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		return 0, fmt.Errorf("%w: the descriptor is not a memfd of ordinary pages", ErrBadRegion)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return 0, fmt.Errorf("%w: the file must be a memfd sealed against shrinking (F_SEAL_SHRINK)", ErrBadRegion)
	}
	m, err := s.mapRegion(sess, fd, mapKey{dev: uint64(st.Dev), ino: st.Ino, size: size})
	if err != nil {
		return 0, err
	}
	mem := m.mem
	// Exclusive: no request reads the region table meanwhile.
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.closed {
		s.unmapRegion(sess, m)
		return 0, ErrClosed
	}
	sess.nextRegion++
	id := sess.nextRegion
	if sess.regions == nil {
		sess.regions = map[uint32]*region{}
	}
	sess.regions[id] = &region{mem: mem, m: m}
	return id, nil
}

// unregister unmaps region id of sess, once no request copies into it.
func (s *Server) unregister(sess *Session, id uint32) error {
	sess.mu.Lock()
	r, ok := sess.regions[id]
	if ok {
		delete(sess.regions, id)
	}
	sess.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: no region %d in this session", ErrBadRegion, id)
	}
	s.unmapRegion(sess, r.m)
	return nil
}

// mapRegion counts a region against sess's MaxRegions and returns the
// server's mapping of the file key names, mapping fd when there is none
// yet (its bytes counted against MaxRegionBytes).
func (s *Server) mapRegion(sess *Session, fd int, key mapKey) (*mapping, error) {
	s.mu.Lock()
	if sess.regionCount >= s.opts.MaxRegions {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %d regions are registered in this session, at most %d", ErrLimit, sess.regionCount, s.opts.MaxRegions)
	}
	if m := s.mu.mappings[key]; m != nil {
		m.refs++
		sess.regionCount++
		s.mu.Unlock()
		return m, nil
	}
	if s.mu.mapped+key.size > int64(s.opts.MaxRegionBytes) {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: registered regions map %d of %d bytes", ErrLimit, s.mu.mapped, s.opts.MaxRegionBytes)
	}
	// Reserved before mapping, which is slow (below) and done unlocked.
	sess.regionCount++
	s.mu.mapped += key.size
	s.mu.Unlock()
	mem, err := unix.Mmap(fd, 0, int(key.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		s.mu.Lock()
		sess.regionCount--
		s.mu.mapped -= key.size
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: mapping it: %v", ErrBadRegion, err)
	}
	// Every page mapped writable now, at registration, instead of one
	// fault per 4 KiB page on the first copy into it (4,096 for 16 MiB,
	// and on a VM with shadow page tables each costs tens of
	// microseconds: a fresh region's first gets ran 20x slower).
	// MAP_POPULATE would not do: on a shared mapping it maps pages
	// read-only, and the first write to each still faults. The pages are
	// the client's memfd's, counted against MaxRegionBytes; a kernel
	// before 5.14 refuses the advice and the copies fault.
	unix.Madvise(mem, unix.MADV_POPULATE_WRITE)
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.mu.mappings[key]; m != nil {
		// Another session mapped the same file meanwhile: use theirs.
		m.refs++
		s.mu.mapped -= key.size
		unix.Munmap(mem)
		return m, nil
	}
	m := &mapping{key: key, mem: mem, refs: 1}
	if s.mu.mappings == nil {
		s.mu.mappings = map[mapKey]*mapping{}
	}
	s.mu.mappings[key] = m
	return m, nil
}

// unmapRegion releases sess's reference to m, unmapping it with the last.
func (s *Server) unmapRegion(sess *Session, m *mapping) {
	s.mu.Lock()
	sess.regionCount--
	m.refs--
	last := m.refs == 0
	if last {
		delete(s.mu.mappings, m.key)
		s.mu.mapped -= m.key.size
	}
	s.mu.Unlock()
	if last {
		unix.Munmap(m.mem)
	}
}

// freeRegions unmaps every region of sess; sess.mu is held exclusively.
func (s *Server) freeRegionsLocked(sess *Session) {
	for id, r := range sess.regions {
		s.unmapRegion(sess, r.m)
		delete(sess.regions, id)
	}
}

// Region returns region id of the session (0 is none: requests name the
// segment then), valid while the session is acquired.
func (s *Session) Region(id uint32) ([]byte, bool) {
	r, ok := s.regions[id]
	if !ok {
		return nil, false
	}
	return r.mem, true
}

// Regions reports the regions registered and the bytes they map, over all
// sessions.
func (s *Server) Regions() (bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.mapped
}

// Copy copies src to dst as the builtin does, where one of them is a
// client's region: should the client's memory fault under the copy anyway
// (a way around the checks at registration this package does not know
// of), the copy fails with ErrBadRegion instead of the process dying.
//
// A copy of parallelMin bytes or more is split across goroutines, one
// part each: one core's memmove reaches a fraction of what the memory
// bus carries (about 10 GB/s against several times that), and the caller
// (a client waiting for its get) has nothing else to do meanwhile.
func Copy(dst, src []byte) (int, error) {
	n := min(len(dst), len(src))
	parts := min(runtime.GOMAXPROCS(0), maxCopyParts, n/parallelMin*2)
	if parts < 2 {
		return copyOne(dst[:n], src[:n])
	}
	// Parts of whole pages, so no two goroutines write one cache line.
	per := (n/parts + 4095) &^ 4095
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for i := range parts {
		lo, hi := min(i*per, n), min((i+1)*per, n)
		if i == parts-1 {
			// The caller's goroutine copies the last part itself.
			_, errs[i] = copyOne(dst[lo:hi], src[lo:hi])
			break
		}
		wg.Go(func() { _, errs[i] = copyOne(dst[lo:hi], src[lo:hi]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return n, nil
}

const (
	// parallelMin is the smallest copy Copy splits: below a few MiB the
	// goroutines' start and wake-up cost more than the second core saves.
	parallelMin = 4 << 20
	// maxCopyParts bounds the goroutines of one copy: the bus, not the
	// cores, is the limit past a handful.
	maxCopyParts = 4
)

func copyOne(dst, src []byte) (n int, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if re, ok := r.(runtime.Error); ok {
				if _, fault := re.(interface{ Addr() uintptr }); fault {
					n, err = 0, fmt.Errorf("%w: the client's memory faulted: %v", ErrBadRegion, re)
					return
				}
			}
			panic(r)
		}
	}()
	return copy(dst, src), nil
}
