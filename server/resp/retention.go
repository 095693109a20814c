package resp

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/yuebing/yuebing/tier"
)

// Retention over RESP (docs/resp.md, "Retention"): SET's RETENTION option
// and YUEBING.RETAIN give a key's block a retention class, as the HTTP
// API's X-Yuebing-Retention does for a block.

// maxRetainTTL bounds RETENTION's TTL, as the HTTP API bounds
// X-Yuebing-Retention-TTL: ten years is "forever" for a cache.
const maxRetainTTL = 10 * 365 * 24 * 3600

// retainOpt is a command's RETENTION class [TTL seconds].
type retainOpt struct {
	class tier.Retention
	ttl   int64 // seconds; 0: until changed
	set   bool
}

// keepsBlock reports whether a value with r must be stored as a block:
// only the tier's blocks carry a class, so a value kept inline would lose
// it.
func (r retainOpt) keepsBlock() bool { return r.set && r.class != tier.RetentionNormal }

// parseRetainOpt reads "class [TTL seconds]" from args, where args[0] is
// the class, and returns how many arguments it used. The error names the
// option, as Redis's replies for a bad option value do.
func parseRetainOpt(args [][]byte) (retainOpt, int, string) {
	var r retainOpt
	if len(args) == 0 {
		return r, 0, errSyntax
	}
	if len(args[0]) == 0 {
		return r, 0, "ERR RETENTION class must be pinned, high, normal or low"
	}
	// Redis's option words are case-insensitive; so are the classes.
	class, err := tier.ParseRetention(string(lowerASCII(args[0])))
	if err != nil {
		return r, 0, "ERR RETENTION class must be pinned, high, normal or low"
	}
	r.class, r.set = class, true
	used := 1
	if len(args) > 1 && eq(args[1], "ttl") {
		if len(args) < 3 {
			return r, 0, errSyntax
		}
		n, err := strconv.ParseInt(string(args[2]), 10, 64)
		if err != nil || n <= 0 || n > maxRetainTTL {
			return r, 0, fmt.Sprintf("ERR RETENTION TTL must be whole seconds from 1 to %d", maxRetainTTL)
		}
		r.ttl = n
		used = 3
	}
	return r, used, ""
}

func lowerASCII(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// retain gives the block of e class r and returns an error reply, or ""
// when done. A class of normal on a value never retained costs nothing.
func (c *conn) retain(e *entry, r retainOpt) string {
	if !r.set || e.blk == nil {
		return ""
	}
	var until time.Time
	if r.ttl > 0 {
		until = c.s.opts.Now().Add(time.Duration(r.ttl) * time.Second)
	}
	var err error
	if fn := c.s.opts.Retain; fn != nil {
		err = fn(c.s.ctx, c.sp.name, e.bkey(), e.size(), r.class, until)
	} else {
		err = c.s.store.SetRetention(e.bkey(), r.class, until)
	}
	switch {
	case err == nil:
		return ""
	case errors.Is(err, tier.ErrNotFound):
		// Evicted between the put and the class: what a reader would
		// have found gone a moment later anyway.
		return "ERR RETENTION " + r.class.String() + ": the value was evicted before its class was set; retry"
	default:
		return "ERR RETENTION " + r.class.String() + ": " + err.Error()
	}
}

// retainStored gives the just-stored block of e, not yet in the key
// table, class r; if that fails the block is deleted, so a refused SET
// (over the pin quota) stores nothing, and the reply is written.
func (c *conn) retainStored(e *entry, r retainOpt) bool {
	msg := c.retain(e, r)
	if msg == "" {
		return true
	}
	c.s.store.Delete(e.bkey())
	c.writeError(msg)
	return false
}

// cmdRetain is YUEBING.RETAIN key class [TTL seconds]: the key's value
// keeps its bytes and deadline and takes the class ("normal" releases a
// pin). It answers :1, or :0 when this node holds no such key. An inline
// value given a class other than normal is copied into a block once.
func cmdRetain(c *conn, args [][]byte) error {
	name := args[1]
	r, used, msg := parseRetainOpt(args[2:])
	if msg == "" && used != len(args)-2 {
		msg = errSyntax
	}
	if msg == "" {
		msg = c.checkKey(name)
	}
	if msg != "" {
		c.writeError(msg)
		return nil
	}
	e := c.find(name)
	if e == nil || e.remote() != nil {
		c.writeInt(0)
		return nil
	}
	if e.inline {
		if !r.keepsBlock() {
			c.writeInt(1)
			return nil
		}
		val := append([]byte(nil), e.val()...)
		before := c.errs
		if err := c.setSmall(name, val, setOpts{xx: true, keepTTL: true, retain: r}, false); err != nil {
			return err
		}
		if c.errs == before {
			c.writeInt(1)
		}
		return nil
	}
	msg = c.retain(e, r)
	switch {
	case msg == "":
		c.writeInt(1)
	case !c.s.present(e):
		c.writeInt(0)
	default:
		c.writeError(msg)
	}
	return nil
}
