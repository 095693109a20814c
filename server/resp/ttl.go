package resp

import (
	"math"
)

func cmdTTL(c *conn, args [][]byte) error  { return ttl(c, args[1], 1000) }
func cmdPTTL(c *conn, args [][]byte) error { return ttl(c, args[1], 1) }

func ttl(c *conn, name []byte, unit int64) error {
	e := c.lookup(name)
	switch {
	case e == nil:
		c.writeInt(-2)
	case e.expireAt.Load() == 0:
		c.writeInt(-1)
	default:
		left := max(e.expireAt.Load()-c.s.nowMs(), 0)
		c.writeInt((left + unit/2) / unit)
	}
	return nil
}

func cmdExpire(c *conn, args [][]byte) error    { return expire(c, args, 1000, "expire", false) }
func cmdPExpire(c *conn, args [][]byte) error   { return expire(c, args, 1, "pexpire", false) }
func cmdExpireAt(c *conn, args [][]byte) error  { return expire(c, args, 1000, "expireat", true) }
func cmdPExpireAt(c *conn, args [][]byte) error { return expire(c, args, 1, "pexpireat", true) }

// expire is EXPIRE and PEXPIRE (and, absolute, EXPIREAT and PEXPIREAT: n
// is a Unix time) with Redis 7's NX, XX, GT and LT. The new deadline holds
// while the server runs; the value's block keeps the one it was written
// with (docs/resp.md, "Expiry").
func expire(c *conn, args [][]byte, unit int64, name string, absolute bool) error {
	n, ok := parseInt(args[2])
	if !ok {
		c.writeError(errInt)
		return nil
	}
	var nx, xx, gt, lt bool
	for _, a := range args[3:] {
		switch {
		case eq(a, "nx"):
			nx = true
		case eq(a, "xx"):
			xx = true
		case eq(a, "gt"):
			gt = true
		case eq(a, "lt"):
			lt = true
		default:
			c.writeError("ERR Unsupported option " + string(trunc(a, 128)))
			return nil
		}
	}
	if nx && (xx || gt || lt) {
		c.writeError("ERR NX and XX, GT or LT options at the same time are not compatible")
		return nil
	}
	if gt && lt {
		c.writeError("ERR GT and LT options at the same time are not compatible")
		return nil
	}
	now := c.s.nowMs()
	base := now
	if absolute {
		base = 0
	}
	if n > math.MaxInt64/unit || n < math.MinInt64/unit || n*unit > 0 && base > math.MaxInt64-n*unit {
		c.writeError("ERR invalid expire time in '" + name + "' command")
		return nil
	}
	at := base + n*unit
	e := c.find(args[1])
	if e == nil {
		e = c.findRemote(args[1])
	}
	if e == nil {
		c.writeInt(0)
		return nil
	}
	cur := e.expireAt.Load()
	switch {
	case nx && cur != 0, xx && cur == 0:
		c.writeInt(0)
		return nil
	case gt && (cur == 0 || at <= cur), lt && cur != 0 && at >= cur:
		c.writeInt(0)
		return nil
	}
	if e.remote() != nil {
		c.writeInt(c.expireRemote(args[1], e, max(at, 1)))
		return nil
	}
	if at <= now {
		if c.s.ks.swap(e, nil) {
			c.s.freeValue(e)
		}
		c.writeInt(1)
		return nil
	}
	if !c.s.ks.setExpiry(e, at) {
		c.writeInt(0) // deleted or replaced meanwhile
		return nil
	}
	c.writeInt(1)
	return nil
}

func cmdPersist(c *conn, args [][]byte) error {
	e := c.find(args[1])
	if e == nil {
		if e = c.findRemote(args[1]); e != nil && e.expireAt.Load() != 0 {
			c.writeInt(c.expireRemote(args[1], e, 0))
			return nil
		}
	}
	if e == nil || e.remote() != nil || e.expireAt.Load() == 0 || !c.s.ks.setExpiry(e, 0) {
		c.writeInt(0)
		return nil
	}
	c.writeInt(1)
	return nil
}
