package resp

import (
	"strconv"
	"time"
)

// Replies are appended to the connection's output buffer, which is written
// when the client has no more pipelined input buffered or when it passes
// flushAt. Values of at least zeroCopyMin bytes are not copied into it: they
// go to the socket with one writev of the buffer, the value's pinned view in
// the store and the CRLF.
const (
	flushAt     = 64 << 10
	zeroCopyMin = 16 << 10
)

var crlf = []byte("\r\n")

func (c *conn) writeRaw(s string) { c.out = append(c.out, s...) }

func (c *conn) writeOK() { c.out = append(c.out, "+OK\r\n"...) }

func (c *conn) writeSimple(s string) {
	c.out = append(c.out, '+')
	c.out = append(c.out, s...)
	c.out = append(c.out, "\r\n"...)
}

// writeError writes an error reply; msg starts with its code ("ERR ...",
// "NOAUTH ..."). CR and LF would end the reply early, so they become spaces.
func (c *conn) writeError(msg string) {
	c.out = append(c.out, '-')
	for i := 0; i < len(msg); i++ {
		b := msg[i]
		if b == '\r' || b == '\n' {
			b = ' '
		}
		c.out = append(c.out, b)
	}
	c.out = append(c.out, "\r\n"...)
	c.errs++
	c.s.stats.errors.Add(1)
}

func (c *conn) writeInt(n int64) {
	c.out = append(c.out, ':')
	c.out = strconv.AppendInt(c.out, n, 10)
	c.out = append(c.out, "\r\n"...)
}

func (c *conn) writeHeader(prefix byte, n int) {
	c.out = append(c.out, prefix)
	c.out = strconv.AppendInt(c.out, int64(n), 10)
	c.out = append(c.out, "\r\n"...)
}

func (c *conn) writeArray(n int) { c.writeHeader('*', n) }

// writeMap writes a map header: a RESP3 map, or in RESP2 a flat array of
// 2n elements.
func (c *conn) writeMap(n int) {
	if c.proto == 3 {
		c.writeHeader('%', n)
		return
	}
	c.writeHeader('*', 2*n)
}

// writeSet writes a set header (RESP3) or an array header (RESP2).
func (c *conn) writeSet(n int) {
	if c.proto == 3 {
		c.writeHeader('~', n)
		return
	}
	c.writeHeader('*', n)
}

func (c *conn) writeNull() {
	if c.proto == 3 {
		c.out = append(c.out, "_\r\n"...)
		return
	}
	c.out = append(c.out, "$-1\r\n"...)
}

func (c *conn) writeNullArray() {
	if c.proto == 3 {
		c.out = append(c.out, "_\r\n"...)
		return
	}
	c.out = append(c.out, "*-1\r\n"...)
}

func (c *conn) writeBulk(b []byte) {
	c.writeHeader('$', len(b))
	c.out = append(c.out, b...)
	c.out = append(c.out, "\r\n"...)
}

func (c *conn) writeBulkString(s string) {
	c.writeHeader('$', len(s))
	c.out = append(c.out, s...)
	c.out = append(c.out, "\r\n"...)
}

// writeVerbatim writes text as a RESP3 verbatim string of format "txt", or
// a bulk string in RESP2 (INFO's reply).
func (c *conn) writeVerbatim(s string) {
	if c.proto != 3 {
		c.writeBulkString(s)
		return
	}
	c.writeHeader('=', len(s)+4)
	c.out = append(c.out, "txt:"...)
	c.out = append(c.out, s...)
	c.out = append(c.out, "\r\n"...)
}

// writeView writes b, a view of a block the caller has pinned, as a bulk
// string. A long view goes to the socket directly from the store's memory;
// the caller may release its pin when writeView returns.
func (c *conn) writeView(b []byte) error {
	if len(b) < zeroCopyMin || c.lp != nil {
		// An event loop never blocks on a write: it copies, and writes
		// when the socket has room.
		c.writeBulk(b)
		return nil
	}
	c.writeHeader('$', len(b))
	c.writeDeadline()
	n, err := c.writeSock([][]byte{c.out, b, crlf})
	c.s.stats.netOut.Add(n)
	c.out = c.out[:0]
	return err
}

// maybeFlush writes the buffered replies once they pass flushAt, so that a
// command with a long reply (MGET of many values, KEYS) needs no more than
// that much buffer.
func (c *conn) maybeFlush() error {
	if len(c.out) < flushAt {
		return nil
	}
	return c.flush()
}

// flush writes the buffered replies.
func (c *conn) flush() error {
	if len(c.out) == 0 || c.lp != nil { // a loop writes its connections' replies itself
		return nil
	}
	c.writeDeadline()
	n, err := c.nc.Write(c.out)
	c.s.stats.netOut.Add(int64(n))
	if cap(c.out) > 4*flushAt {
		c.out = nil // a large reply (KEYS, INFO) is not kept by an idle connection
	}
	c.out = c.out[:0]
	return err
}

// writeDeadline bounds how long a write may wait for the client to read:
// a client that stops reading would otherwise hold its goroutine, and the
// pins of the values being written, forever. The deadline is moved only
// when a quarter of it has passed, as moving it costs a timer update.
func (c *conn) writeDeadline() {
	if c.s.opts.StallTimeout == 0 {
		return
	}
	now := time.Now()
	if now.Sub(c.wdl) < c.s.opts.StallTimeout/4 {
		return
	}
	c.wdl = now
	c.nc.SetWriteDeadline(now.Add(c.s.opts.StallTimeout))
}
