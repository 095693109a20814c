//go:build linux

package resp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/internal/rawsock"
)

// loops are a server's event loops; connections are dealt round-robin.
type loops struct {
	s    *Server
	all  []*loop
	next atomic.Uint64
}

// loop is one epoll instance and the goroutine that waits on it. Sockets
// are registered edge-triggered: a level-triggered item goes back on
// epoll's ready list after every epoll_wait that returns it, which wakes
// the runtime's poller on the epoll descriptor once more per batch for
// nothing. So the loop owes each socket what an edge no longer repeats: a
// read that fills the buffer is followed by another (the connection waits
// on more), a write that meets EAGAIN waits for EPOLLOUT's edge, and a
// switch between EPOLLIN and EPOLLOUT is an EPOLL_CTL_MOD, which reports
// the socket at once if it is ready already.
type loop struct {
	s    *Server
	epfd int
	buf  []byte // one read's bytes, shared by the loop's connections
	// more holds the connections whose last read filled its buffer: read
	// again in the next round, after the other ready sockets, so that one
	// client streaming requests does not keep the others waiting.
	more, moreNext []*conn
	ready          []*conn
	mu             struct {
		sync.Mutex
		conns map[int]*conn // by file descriptor
	}
	spans [loopMaxArgs][2]int
	args  [][]byte
}

func newLoops(s *Server, n int) (*loops, error) {
	if n == 0 {
		n = defaultLoops(runtime.GOMAXPROCS(0))
	}
	ls := &loops{s: s}
	for range n {
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			for _, l := range ls.all {
				unix.Close(l.epfd)
			}
			return nil, fmt.Errorf("resp: event loop: epoll_create1: %w", err)
		}
		l := &loop{s: s, epfd: fd, buf: make([]byte, 64<<10)}
		l.mu.conns = make(map[int]*conn)
		ls.all = append(ls.all, l)
	}
	return ls, nil
}

// defaultLoops is one loop per two Ps. A loop holds a P only while it
// serves a batch, and each wake-up costs it epoll_wait calls and a trip
// through the scheduler whatever the batch's size, so fewer loops serve
// more connections per wake-up; the other Ps run handed-off connections,
// the store and the poller. On 2 cores one loop instead of two took 16-29%
// less CPU per request at -c 8 and 3-6% at -c 50 (docs/benchmarks.md).
func defaultLoops(procs int) int { return max(1, procs/2) }

// start runs the loops until the server's background work stops, which
// Shutdown does once every connection is gone.
func (ls *loops) start() {
	for _, l := range ls.all {
		ls.s.bg.wg.Go(l.run)
	}
}

// add moves c's socket into a loop, and reports false when it cannot
// (not a TCP or Unix socket): c is then served by a goroutine as before.
// The descriptor is duplicated and the net.Conn closed, so that the Go
// runtime's poller no longer watches the socket beside the loop's.
func (ls *loops) add(c *conn) bool {
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	fd := -1
	cerr := rc.Control(func(orig uintptr) {
		fd, err = unix.FcntlInt(orig, unix.F_DUPFD_CLOEXEC, 0)
	})
	if cerr != nil || err != nil {
		return false
	}
	// The duplicate shares the socket's O_NONBLOCK, which Go set.
	lc := &loopConn{laddr: c.nc.LocalAddr(), raddr: c.nc.RemoteAddr()}
	c.nc.Close()
	l := ls.all[ls.next.Add(1)%uint64(len(ls.all))]
	c.lp = &loopState{l: l, fd: fd}
	lc.lp = c.lp
	c.nc = lc
	l.mu.Lock()
	l.mu.conns[fd] = c
	l.mu.Unlock()
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: loopIn, Fd: int32(fd)}); err != nil {
		ls.s.opts.Logger.Warn("resp: event loop: epoll_ctl add failed; closing the connection", "err", err)
		l.close(c)
	}
	return true
}

func (l *loop) run() {
	// The epoll descriptor is itself registered with the runtime's
	// poller, which reports it readable when its sockets have events: the
	// loop asks epoll_wait with no timeout and, when nothing is ready,
	// parks as any goroutine waiting on a socket does. Blocking in
	// epoll_wait instead holds a thread in a system call, which the
	// runtime answers with sysmon wake-ups and P hand-offs that cost more
	// than the loop saves (docs/benchmarks.md).
	f, rc := l.pollable()
	if f != nil {
		defer f.Close()
	} else {
		defer unix.Close(l.epfd)
	}
	events := make([]unix.EpollEvent, 256)
	l.ready = make([]*conn, 0, len(events))
	lastTick := time.Now()
	for {
		var err error
		if rc != nil {
			f.SetReadDeadline(lastTick.Add(loopTick))
			// One RawRead serves batch after batch: it clears the
			// descriptor's readiness once, before the first epoll_wait,
			// and not again between a batch and the park that follows,
			// so an edge that came while the batch ran makes the park
			// return at once. A batch smaller than events has emptied
			// epoll's ready list, and every socket event after it is a
			// new edge on the epoll descriptor: the loop parks without
			// the epoll_wait that would only return 0.
			rerr := rc.Read(func(uintptr) bool {
				for {
					n, werr := epollPoll(l.epfd, events)
					if werr != nil {
						if errors.Is(werr, unix.EINTR) {
							continue
						}
						err = werr
						return true
					}
					l.serve(events[:n])
					if time.Since(lastTick) >= loopTick {
						return true
					}
					if n < len(events) && len(l.more) == 0 {
						return false
					}
				}
			})
			if rerr != nil && !errors.Is(rerr, os.ErrDeadlineExceeded) {
				err = rerr
			}
		} else {
			timeout := int(loopTick / time.Millisecond)
			if len(l.more) > 0 {
				timeout = 0
			}
			var n int
			n, err = unix.EpollWait(l.epfd, events, timeout)
			if err == nil {
				l.serve(events[:n])
			}
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.s.opts.Logger.Error("resp: event loop: epoll_wait failed", "err", err)
			time.Sleep(loopTick) // not a spin; Shutdown still closes every connection
		}
		if now := time.Now(); now.Sub(lastTick) >= loopTick {
			lastTick = now
			if l.tick(now) {
				return
			}
		}
	}
}

// serve runs a batch of events, then reads once more each connection whose
// previous read filled its buffer.
func (l *loop) serve(events []unix.EpollEvent) {
	ready := l.ready[:0]
	l.mu.Lock()
	for _, ev := range events {
		ready = append(ready, l.mu.conns[int(ev.Fd)])
	}
	l.mu.Unlock()
	for i, c := range ready {
		if c == nil || c.lp == nil {
			continue // closed or handed off by an earlier event of this batch
		}
		if events[i].Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
			c.lp.hup = true
		}
		if events[i].Events&unix.EPOLLOUT != 0 || c.lp.outWait {
			l.writable(c)
		} else {
			l.readable(c)
		}
	}
	clear(ready)
	l.ready = ready
	if len(l.more) == 0 {
		return
	}
	more := l.more
	l.more, l.moreNext = l.moreNext[:0], nil
	for _, c := range more {
		if c.lp == nil {
			continue
		}
		c.lp.more = false
		if !c.lp.outWait {
			l.readable(c)
		}
	}
	clear(more)
	l.moreNext = more[:0]
}

// pollable registers the epoll descriptor with the runtime's poller; nil
// if it cannot, and the loop then blocks in epoll_wait.
func (l *loop) pollable() (*os.File, syscall.RawConn) {
	if err := unix.SetNonblock(l.epfd, true); err != nil {
		return nil, nil
	}
	f := os.NewFile(uintptr(l.epfd), "epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, nil
	}
	return f, rc
}

// tick closes connections that Shutdown, CLIENT KILL or the stall timeout
// ended, and reports when the loop must stop.
func (l *loop) tick(now time.Time) (stop bool) {
	stopping := false
	select {
	case <-l.s.stopping:
		stopping = true
	default:
	}
	l.mu.Lock()
	var doomed []*conn
	for _, c := range l.mu.conns {
		st := c.s.opts.StallTimeout
		stalled := st > 0 && !c.lp.since.IsZero() && now.Sub(c.lp.since) > st
		if stopping || c.lp.killed.Load() || stalled {
			doomed = append(doomed, c)
		}
	}
	l.mu.Unlock()
	for _, c := range doomed {
		if stopping {
			l.write(c) // the replies so far, if the socket takes them
		}
		l.close(c)
	}
	select {
	case <-l.s.bg.stop:
		l.mu.Lock()
		left := len(l.mu.conns)
		l.mu.Unlock()
		return left == 0
	default:
		return false
	}
}

// readable reads what c's socket holds, runs the whole commands in it and
// writes their replies.
func (l *loop) readable(c *conn) {
	lp := c.lp
	var data []byte
	full := false
	if len(lp.in) == 0 {
		n, err := readFD(lp.fd, l.buf)
		if n <= 0 {
			if err != errAgain {
				l.close(c) // EOF, reset
			}
			return
		}
		data = l.buf[:n]
		full = n == len(l.buf)
	} else {
		if cap(lp.in)-len(lp.in) < 16<<10 {
			lp.in = append(make([]byte, 0, len(lp.in)+64<<10), lp.in...)
		}
		n, err := readFD(lp.fd, lp.in[len(lp.in):cap(lp.in)])
		if n <= 0 {
			if err != errAgain {
				l.close(c)
			}
			return
		}
		full = n == cap(lp.in)-len(lp.in)
		data = lp.in[:len(lp.in)+n]
	}
	c.s.stats.netIn.Add(int64(len(data) - len(lp.in)))
	l.process(c, data)
	// A short read drained the socket; after a full one its edge may
	// not come again, nor after one that carried the FIN, whose EOF the
	// next read tells. A connection waiting on EPOLLOUT is read again
	// once its EPOLL_CTL_MOD back to EPOLLIN reports it.
	if c.lp != nil && (full || c.lp.hup) && !c.lp.outWait && !c.lp.more {
		c.lp.more = true
		l.more = append(l.more, c)
	}
}

// loopIn is a socket's registration while the loop reads it. EPOLLRDHUP
// marks an edge that carried the peer's FIN: the bytes and the FIN can
// come within one edge, and a short read then leaves the EOF untold.
const loopIn = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET

var errAgain = errors.New("again")

// epollPoll, like the loop's reads and writes (rawsock.ReadFD, WriteFD),
// never blocks (no timeout), so it calls the kernel without telling the
// scheduler. A call through syscall.Syscall does entersyscall, which
// wakes sysmon from its deep sleep whenever every P was idle, as they are
// each time a server waits on its clients; sysmon then polls every 20 µs
// for a millisecond or more. On two cores those wake-ups were 16% of the
// node's samples at -c 8 (docs/benchmarks.md).
func epollPoll(epfd int, events []unix.EpollEvent) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func readFD(fd int, p []byte) (int, error) {
	n, err := rawsock.ReadFD(fd, p)
	if errors.Is(err, unix.EAGAIN) {
		return 0, errAgain
	}
	return n, err
}

// process runs the whole commands at the start of data, keeps an
// incomplete one for the next read, hands the connection to a goroutine
// at the first command the loop must not run, and writes the replies.
func (l *loop) process(c *conn, data []byte) {
	lp := c.lp
	for len(data) > 0 {
		if len(c.out)-lp.outPos >= flushAt {
			// Replies are written every flushAt bytes; a client not
			// reading them is read no further until it does.
			if !l.write(c) {
				l.close(c)
				return
			}
			if lp.outPos < len(c.out) {
				break
			}
		}
		size, nargs, verdict := scanFrame(data, c.r.lim, &l.spans)
		if verdict == frameMore {
			break
		}
		if verdict == frameOther {
			l.handoff(c, data)
			return
		}
		l.args = l.args[:0]
		for _, sp := range l.spans[:nargs] {
			l.args = append(l.args, data[sp[0]:sp[1]])
		}
		if !c.loopSafe(l.args) {
			l.handoff(c, data)
			return
		}
		lp.feed = data[:size]
		data = data[size:]
		if !l.runOne(c) {
			l.write(c)
			l.close(c)
			return
		}
		if c.quit {
			l.write(c)
			l.close(c)
			return
		}
	}
	// What is left is the start of a request, or requests held back
	// while the client does not read: kept in the connection's buffer.
	lp.in = append(lp.in[:0], data...)
	if len(lp.in) == 0 && cap(lp.in) > loopMaxFrame {
		lp.in = nil
	}
	if !l.write(c) {
		l.close(c)
		return
	}
	l.waitState(c)
}

// runOne runs the command in c.lp.feed as serve does, and reports false
// if the connection must close.
func (l *loop) runOne(c *conn) bool {
	if c.setIdle(false) {
		return false // Shutdown began
	}
	c.busy = true
	n, err := c.r.begin()
	if err == nil {
		err = c.exec(n)
	}
	c.busy = false
	c.setIdle(true)
	if err == nil && (len(c.lp.feed) != 0 || c.r.br.Buffered() != 0) {
		err = errLoopDry
	}
	if err != nil {
		c.s.opts.Logger.Error("resp: event loop: a command ran off its frame; closing", "conn", c.id, "err", err)
		return false
	}
	return true
}

// write writes what the socket takes of c's replies; false on an error.
func (l *loop) write(c *conn) bool {
	lp := c.lp
	for lp.outPos < len(c.out) {
		n, err := rawsock.WriteFD(lp.fd, c.out[lp.outPos:])
		if n > 0 {
			lp.outPos += n
			c.s.stats.netOut.Add(int64(n))
		}
		switch {
		case err == nil:
		case errors.Is(err, unix.EAGAIN):
			return true
		default:
			return false
		}
	}
	if cap(c.out) > 4*flushAt {
		c.out = nil // a large reply is not kept by an idle connection
	}
	c.out, lp.outPos = c.out[:0], 0
	return true
}

// waitState registers c for EPOLLOUT alone while replies wait for room, so
// that a client that does not read is not read either, and for EPOLLIN
// otherwise; it dates a wait on the client, for the stall timeout.
func (l *loop) waitState(c *conn) {
	lp := c.lp
	pending := lp.outPos < len(c.out)
	if pending != lp.outWait {
		ev := uint32(loopIn)
		if pending {
			ev = unix.EPOLLOUT | unix.EPOLLET
		}
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, lp.fd, &unix.EpollEvent{Events: ev, Fd: int32(lp.fd)}); err != nil {
			l.close(c)
			return
		}
		lp.outWait = pending
	}
	switch waiting := pending || len(lp.in) > 0; {
	case !waiting:
		lp.since = time.Time{}
	case lp.since.IsZero():
		lp.since = time.Now()
	}
}

// writable writes waiting replies, then runs the requests held back.
func (l *loop) writable(c *conn) {
	if !l.write(c) {
		l.close(c)
		return
	}
	if c.lp.outPos < len(c.out) {
		return
	}
	l.waitState(c)
	if c.lp != nil && len(c.lp.in) > 0 {
		l.process(c, c.lp.in)
	}
}

// forget takes c out of its loop.
func (l *loop) forget(c *conn) {
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, c.lp.fd, nil)
	l.mu.Lock()
	delete(l.mu.conns, c.lp.fd)
	l.mu.Unlock()
}

func (l *loop) close(c *conn) {
	l.forget(c)
	unix.Close(c.lp.fd)
	c.lp = nil
	c.endTx()
	c.unwatch()
	c.s.untrack(c)
}

// handoff gives c to a goroutine of its own for good, with rest, the
// bytes read and not run, to be read first.
func (l *loop) handoff(c *conn, rest []byte) {
	lp := c.lp
	l.forget(c)
	c.pre = append([]byte(nil), rest...)
	c.out = append([]byte(nil), c.out[lp.outPos:]...)
	// net.FileConn takes a duplicate, registered with the runtime's
	// poller; the loop's own descriptor is closed.
	f := os.NewFile(uintptr(lp.fd), "resp")
	nc, err := net.FileConn(f)
	f.Close()
	c.lp = nil
	if err != nil {
		c.s.opts.Logger.Warn("resp: event loop: cannot hand a connection to a goroutine; closing it", "conn", c.id, "err", err)
		c.endTx()
		c.unwatch()
		c.s.untrack(c)
		return
	}
	c.nc = nc
	go c.serve()
}
