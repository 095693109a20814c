package resp

import (
	"bytes"
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// The event loop (Options.EventLoop) serves many connections from one
// goroutine: it reads what a socket has, runs every whole command the
// bytes hold with the parser and the command code of the goroutine path,
// and writes the replies once per wake-up. It runs only commands it knows
// cannot block (loopSafe); at the first other one, or a request it cannot
// see whole within loopMaxFrame, the connection leaves its loop for a
// goroutine of its own (serve), which reads first what the loop had
// buffered. Limits and protocol errors are thus the goroutine path's own.

const (
	// loopMaxFrame bounds a request the loop buffers and runs, and what it
	// holds per connection between reads: larger requests carry values
	// that stream into the store, which may block.
	loopMaxFrame = 32 << 10
	// loopMaxArgs bounds the arguments of a request run in the loop; it
	// is the length of the scan's span table.
	loopMaxArgs = 64
	// loopTick is how often a loop looks at timeouts, Shutdown and
	// CLIENT KILL, which come to it without a socket event.
	loopTick = 100 * time.Millisecond
)

// errLoopDry: the parser read past the command the loop handed it.
var errLoopDry = errors.New("resp: BUG: event loop parser ran past its frame")

// loopState is a connection's state in its loop, used by the loop's
// goroutine only (killed excepted).
type loopState struct {
	l    *loop
	fd   int
	feed []byte // the command the parser may read now
	in   []byte // bytes read and not yet run: the start of a request
	// outPos is how much of conn.out the socket took; the rest waits
	// for EPOLLOUT.
	outPos  int
	outWait bool // registered for EPOLLOUT (and not EPOLLIN)
	more    bool // on the loop's list of sockets to read again
	// hup: epoll reported the peer's FIN, a hang-up or an error, which
	// may have come within the edge of the bytes before it; the socket is
	// read until it says EOF, since no other edge will tell.
	hup    bool
	since  time.Time // when the connection began to wait on its client
	killed atomic.Bool
}

// loopConn stands for a connection's socket while its loop owns the file
// descriptor: addresses for CLIENT LIST and logs; Close asks the loop.
type loopConn struct {
	laddr, raddr net.Addr
	lp           *loopState
}

func (lc *loopConn) Read([]byte) (int, error)         { return 0, errLoopDry }
func (lc *loopConn) Write([]byte) (int, error)        { return 0, errLoopDry }
func (lc *loopConn) Close() error                     { lc.lp.killed.Store(true); return nil }
func (lc *loopConn) LocalAddr() net.Addr              { return lc.laddr }
func (lc *loopConn) RemoteAddr() net.Addr             { return lc.raddr }
func (lc *loopConn) SetDeadline(time.Time) error      { return nil }
func (lc *loopConn) SetReadDeadline(time.Time) error  { return nil }
func (lc *loopConn) SetWriteDeadline(time.Time) error { return nil }

// Frame scan verdicts.
const (
	frameWhole = iota // a whole request the loop may run
	frameMore         // the start of one: read more
	frameOther        // anything else: the goroutine path's
)

// scanFrame looks for a whole multibulk request at the start of b within
// the loop's bounds and the connection's limits, recording its arguments'
// offsets in spans. Inline commands, empty requests and whatever the
// parser would refuse are frameOther: the goroutine path answers them
// exactly as it always has.
func scanFrame(b []byte, lim limits, spans *[loopMaxArgs][2]int) (size, nargs, verdict int) {
	more := func() (int, int, int) {
		if len(b) >= loopMaxFrame {
			return 0, 0, frameOther
		}
		return 0, 0, frameMore
	}
	if len(b) == 0 {
		return 0, 0, frameMore
	}
	if b[0] != '*' {
		return 0, 0, frameOther
	}
	line, rest, v := scanLine(b[1:])
	if v != frameWhole {
		return 0, 0, v
	}
	n, ok := parseInt(line)
	maxArgs := min(loopMaxArgs, lim.maxArgs)
	if lim.unauth {
		maxArgs = min(maxArgs, unauthArgs)
	}
	if !ok || n <= 0 || n > int64(maxArgs) {
		return 0, 0, frameOther
	}
	pos := len(b) - len(rest)
	held := 0
	for i := 0; i < int(n); i++ {
		if pos >= len(b) {
			return more()
		}
		if b[pos] != '$' {
			return 0, 0, frameOther
		}
		line, rest, v := scanLine(b[pos+1:])
		if v == frameMore {
			return more()
		}
		if v != frameWhole {
			return 0, 0, v
		}
		l, ok := parseInt(line)
		if !ok || l < 0 || l > loopMaxFrame || l > lim.maxBulk || lim.unauth && l > unauthBulk {
			return 0, 0, frameOther
		}
		held += int(l) + argOverhead
		if held > lim.maxRequest {
			return 0, 0, frameOther
		}
		start := len(b) - len(rest)
		end := start + int(l)
		if end+2 > loopMaxFrame {
			return 0, 0, frameOther
		}
		if end+2 > len(b) {
			return more()
		}
		if b[end] != '\r' || b[end+1] != '\n' {
			return 0, 0, frameOther
		}
		spans[i] = [2]int{start, end}
		pos = end + 2
	}
	return pos, int(n), frameWhole
}

// scanLine splits a CRLF line of a count (at most 21 bytes) off b:
// frameMore if b may yet hold one, frameOther if it cannot.
func scanLine(b []byte) (line, rest []byte, verdict int) {
	i := bytes.IndexByte(b[:min(len(b), 23)], '\n')
	switch {
	case i < 0 && len(b) < 23:
		return nil, nil, frameMore
	case i < 1 || b[i-1] != '\r':
		return nil, nil, frameOther
	}
	return b[:i-1], b[i+1:], frameWhole
}

// loopSafe reports whether the command in args can run in an event loop:
// whether it is known to finish without waiting on anything but memory.
// Values that live in store blocks (a GET may read them back from SSD
// under the budget), the cluster (every key command may ask other nodes),
// AUTH (a failure is answered after a delay), MULTI and the rest go to
// the goroutine path.
func (c *conn) loopSafe(args [][]byte) bool {
	cmd := lookupCommand(args[0])
	n := len(args)
	if cmd == nil || cmd.arity > 0 && n != cmd.arity || cmd.arity < 0 && n < -cmd.arity {
		return true // answered with an error at once
	}
	switch cmd.name {
	case "ping", "echo", "select", "dbsize", "quit", "command", "info":
		return true
	case "hello":
		// Without AUTH: a client library's handshake, at once.
		for _, a := range args[1:] {
			if eq(a, "auth") {
				return false
			}
		}
		return true
	case "client":
		sub := args[1]
		return eq(sub, "id") || eq(sub, "getname") || eq(sub, "setname") || eq(sub, "setinfo")
	}
	if !c.authed {
		return !cmd.noAuth // NOAUTH at once; AUTH, HELLO and the like are not
	}
	if c.s.opts.Cluster != nil {
		return false
	}
	switch cmd.name {
	case "exists", "strlen", "ttl", "pttl", "type":
		return true // the key table only
	case "get", "incr", "decr", "incrby", "decrby":
		return c.inlineOrNone(args[1])
	case "mget", "del", "unlink":
		for _, k := range args[1:] {
			if !c.inlineOrNone(k) {
				return false
			}
		}
		return true
	case "set", "setnx":
		return len(args[2]) <= c.s.opts.InlineMax && c.inlineOrNone(args[1])
	}
	return false
}

// inlineOrNone reports whether name has no value or an inline one: reading
// or replacing it touches no store block.
func (c *conn) inlineOrNone(name []byte) bool {
	e := c.find(name)
	return e == nil || e.inline
}
