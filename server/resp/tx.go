package resp

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"github.com/yuebing/yuebing/server/auth"
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

// watched is what WATCH saw of a key: its table entry (nil for none) and
// that entry's deadline. A write replaces the entry, EXPIRE and PERSIST
// change the deadline; either makes EXEC fail.
type watched struct {
	e        *entry
	expireAt int64
}

// maxWatched bounds the keys one connection watches.
const maxWatched = 10000

// txControl are the commands MULTI does not queue.
func txControl(cmd *command) bool {
	switch cmd.name {
	case "multi", "exec", "discard", "quit", "reset", "watch", "unwatch":
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
	// Bytes of b not yet charged to the budget: long arguments are charged
	// before they are read, short ones every 64 KiB, so a command of many
	// short arguments is bounded as it arrives.
	var admitted int64
	charge := func(n int64) string {
		release, msg := c.s.admit(n)
		if msg == "" {
			t.release = append(t.release, release)
			admitted += n
		}
		return msg
	}
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
			if msg := charge(big); msg != "" {
				return refuse(msg)
			}
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
		if due := int64(len(b)) - admitted; due >= smallArg {
			if msg := charge(due); msg != "" {
				return refuse(msg)
			}
		}
	}
	if msg := charge(int64(len(b)) - admitted); msg != "" {
		t.aborted = true
		c.writeError(msg)
		return nil
	}
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
	c.unwatch()
	c.proto = 2
	c.mu.Lock()
	c.mu.name, c.mu.proto = "", 2
	c.mu.Unlock()
	if c.s.opts.Tokens != nil {
		c.principal, c.authed, c.sp = auth.Principal{}, false, nil
		c.mu.Lock()
		c.mu.user, c.mu.admin = "", false
		c.mu.Unlock()
		c.r.lim = c.s.limits(true)
	}
	c.writeRaw("+RESET\r\n")
	return nil
}

// cmdWatch records the keys' state for EXEC to compare. Keys held by
// another node of a cluster are watched as absent here: a write on that
// node is seen only once it reaches this one.
func cmdWatch(c *conn, args [][]byte) error {
	if c.tx != nil {
		c.writeError("ERR WATCH inside MULTI is not allowed")
		return nil
	}
	if len(c.watch)+len(args)-1 > maxWatched {
		c.writeError(fmt.Sprintf("ERR more than %d keys watched", maxWatched))
		return nil
	}
	// Watched keys stay in memory until EXEC: their bytes are charged to
	// the in-flight budget until then.
	var size int64
	for _, name := range args[1:] {
		size += 2*int64(len(name)+len(c.sp.name)) + 64
	}
	release, msg := c.s.admit(size)
	if msg != "" {
		c.writeError(msg)
		return nil
	}
	c.watchRelease = append(c.watchRelease, release)
	if c.watch == nil {
		c.watch = make(map[string]watched, len(args)-1)
	}
	for _, name := range args[1:] {
		key := string(compose(nil, c.sp, name))
		if _, ok := c.watch[key]; ok {
			continue
		}
		c.watch[key] = c.watchState(key, name)
		c.watchNames = append(c.watchNames, string(name))
	}
	c.writeOK()
	return nil
}

func (c *conn) watchState(key string, name []byte) watched {
	e := c.resolve(c.s.ks.get([]byte(key)), name)
	if e == nil {
		return watched{}
	}
	return watched{e: e, expireAt: e.expireAt.Load()}
}

// watchBroken reports whether a watched key changed since WATCH.
func (c *conn) watchBroken() bool {
	for _, name := range c.watchNames {
		key := string(compose(nil, c.sp, []byte(name)))
		w, ok := c.watch[key]
		if !ok || c.watchState(key, []byte(name)) != w {
			return true // or watched as another tenant's key
		}
	}
	return false
}

func (c *conn) unwatch() {
	for _, r := range c.watchRelease {
		r()
	}
	c.watch, c.watchNames, c.watchRelease = nil, nil, nil
}

func cmdUnwatch(c *conn, _ [][]byte) error {
	c.unwatch()
	c.writeOK()
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
	c.unwatch()
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
	broken := c.watchBroken()
	c.unwatch() // EXEC unwatches, run or not
	if t.aborted {
		c.writeError("EXECABORT Transaction discarded because of previous errors.")
		return nil
	}
	if broken {
		c.writeNullArray() // a watched key changed: nothing runs
		return nil
	}
	c.tx = nil // the queued commands run, not queue
	c.writeArray(len(t.cmds))
	saved := c.r
	defer func() { c.r = saved }()
	// One reader over each queued command in turn: its buffer is 64 KiB.
	var src bytes.Reader
	c.r = newReader(&src, saved.lim)
	for _, b := range t.cmds {
		src.Reset(b)
		c.r.br.Reset(&src)
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
