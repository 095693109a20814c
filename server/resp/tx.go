package resp

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// tx is a transaction being queued: MULTI, then commands answered +QUEUED,
// then EXEC runs them in order and answers their replies as one array, or
// DISCARD drops them. An error while queueing (an unknown command, a wrong
// arity, a command over the limits) makes EXEC answer EXECABORT and run
// nothing, as Redis does, so a client never sees a failed transaction
// whose writes happened.
//
// Queued commands are held in memory in their wire form, at most
// Options.MaxValueSize bytes per transaction and charged to the in-flight
// budget until EXEC or DISCARD. EXEC does not stop other clients' commands
// between its own: a transaction is all-or-nothing as to what is run, not
// isolated (docs/resp.md).
type tx struct {
	cmds    [][]byte // each command as a RESP multibulk
	bytes   int64
	release []func()
	aborted bool
}

// txControl are the commands MULTI does not queue.
func txControl(cmd *command) bool {
	switch cmd.name {
	case "multi", "exec", "discard", "quit", "reset":
		return true
	}
	return false
}

// abortTx marks the transaction being queued, if any, to fail at EXEC.
func (c *conn) abortTx() {
	if c.tx != nil {
		c.tx.aborted = true
	}
}

// endTx drops the transaction and gives back its budget.
func (c *conn) endTx() {
	if c.tx == nil {
		return
	}
	for _, r := range c.tx.release {
		r()
	}
	c.tx = nil
}

// queue reads the rest of cmd, already named, into the transaction and
// answers +QUEUED.
func (c *conn) queue(cmd *command, n int) error {
	t := c.tx
	limit := c.s.opts.MaxValueSize
	refuse := func(msg string) error {
		t.aborted = true
		if err := c.r.skipRest(); err != nil {
			return err
		}
		c.writeError(msg)
		return nil
	}
	var b []byte
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "\r\n$"...)
	b = strconv.AppendInt(b, int64(len(cmd.name)), 10)
	b = append(b, "\r\n"...)
	b = append(b, cmd.name...)
	b = append(b, "\r\n"...)
	var bigThis int64 // admitted as read
	for c.r.remaining > 0 {
		arg, big, err := c.r.next()
		if err != nil {
			return err
		}
		size := int64(len(arg))
		if big > 0 {
			size = big
		}
		if t.bytes+int64(len(b))+size > limit {
			return refuse(fmt.Sprintf("ERR transaction of more than %d bytes queued", limit))
		}
		if big > 0 {
			release, msg := c.s.admit(big)
			if msg != "" {
				return refuse(msg)
			}
			t.release = append(t.release, release)
			bigThis += big
		}
		b = append(b, '$')
		b = strconv.AppendInt(b, size, 10)
		b = append(b, "\r\n"...)
		if big > 0 {
			if b, err = c.r.appendPending(b); err != nil {
				return err
			}
		} else {
			b = append(b, arg...)
		}
		b = append(b, "\r\n"...)
		c.r.forget()
	}
	release, msg := c.s.admit(int64(len(b)) - bigThis)
	if msg != "" {
		t.aborted = true
		c.writeError(msg)
		return nil
	}
	t.release = append(t.release, release)
	t.bytes += int64(len(b))
	t.cmds = append(t.cmds, b)
	c.writeRaw("+QUEUED\r\n")
	return nil
}

// cmdReset returns the connection to its state on connect: no
// transaction, RESP2, no name, and, where clients authenticate, not
// authenticated.
func cmdReset(c *conn, _ [][]byte) error {
	c.endTx()
	c.proto = 2
	c.mu.Lock()
	c.mu.name, c.mu.proto = "", 2
	c.mu.Unlock()
	if c.s.opts.Tokens != nil {
		c.authed, c.sp = false, nil
		c.r.lim = c.s.limits(true)
	}
	c.writeRaw("+RESET\r\n")
	return nil
}

func cmdMulti(c *conn, _ [][]byte) error {
	if c.tx != nil {
		c.writeError("ERR MULTI calls can not be nested")
		return nil
	}
	c.tx = &tx{}
	c.writeOK()
	return nil
}

func cmdDiscard(c *conn, _ [][]byte) error {
	if c.tx == nil {
		c.writeError("ERR DISCARD without MULTI")
		return nil
	}
	c.endTx()
	c.writeOK()
	return nil
}

func cmdExec(c *conn, _ [][]byte) error {
	t := c.tx
	if t == nil {
		c.writeError("ERR EXEC without MULTI")
		return nil
	}
	defer c.endTx()
	if t.aborted {
		c.writeError("EXECABORT Transaction discarded because of previous errors.")
		return nil
	}
	c.tx = nil // the queued commands run, not queue
	c.writeArray(len(t.cmds))
	saved := c.r
	defer func() { c.r = saved }()
	for _, b := range t.cmds {
		c.r = newReader(bytes.NewReader(b), saved.lim)
		n, err := c.r.begin()
		if err == nil {
			err = c.exec(n)
		}
		if err != nil {
			// The command was queued as read, so it parses; this is a
			// bug, answered so the array keeps its length.
			c.writeError("ERR " + err.Error())
		}
	}
	c.tx = t // for endTx's release
	return nil
}

// appendPending appends the pending long argument to dst and consumes its
// CRLF.
func (r *reader) appendPending(dst []byte) ([]byte, error) {
	if !r.hasBig {
		panic("BUG: resp: appendPending without a pending argument")
	}
	n := r.pending
	r.hasBig, r.pending = false, 0
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	if _, err := io.ReadFull(r.br, dst[start:]); err != nil {
		return nil, unexpected(err)
	}
	return dst, r.crlf()
}
