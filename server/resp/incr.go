package resp

import (
	"math"
	"strconv"

	"github.com/yuebing/yuebing/tier"
)

func cmdIncr(c *conn, args [][]byte) error { return incrBy(c, args[1], 1) }
func cmdDecr(c *conn, args [][]byte) error { return incrBy(c, args[1], -1) }

func cmdIncrBy(c *conn, args [][]byte) error {
	d, ok := parseInt(args[2])
	if !ok {
		c.writeError(errInt)
		return nil
	}
	return incrBy(c, args[1], d)
}

func cmdDecrBy(c *conn, args [][]byte) error {
	d, ok := parseInt(args[2])
	if !ok || d == math.MinInt64 {
		c.writeError(errInt)
		return nil
	}
	return incrBy(c, args[1], -d)
}

// incrBy adds delta to the integer stored at name (0 when absent),
// keeping its deadline. The new value replaces the one read only if the
// key still holds it (the table's compare-and-swap), retried otherwise, so
// two clients' increments never lose one.
func incrBy(c *conn, name []byte, delta int64) error {
	if msg := c.checkKey(name); msg != "" {
		c.writeError(msg)
		return nil
	}
	for range 64 {
		var cur, expireAt int64
		h, e, msg := c.open(name)
		if msg != "" {
			c.writeError(msg)
			return nil
		}
		if h != nil {
			v, ok := int64(0), len(h.Bytes()) <= 20
			if ok {
				v, ok = parseInt(h.Bytes())
			}
			h.Release()
			if !ok {
				c.writeError(errInt)
				return nil
			}
			cur, expireAt = v, e.expireAt.Load()
		}
		if delta > 0 && cur > math.MaxInt64-delta || delta < 0 && cur < math.MinInt64-delta {
			c.writeError("ERR increment or decrement would overflow")
			return nil
		}
		next := cur + delta
		var buf [20]byte
		val := strconv.AppendInt(buf[:0], next, 10)
		var ne *entry
		if c.s.inlineOK(len(val)) {
			ne = c.newInline(name, val, expireAt)
		} else {
			var popts tier.PutOptions
			ne, popts = c.newEntry(name, int64(len(val)), expireAt)
			if _, err := c.s.store.Put(c.s.ctx, ne.bkey(), val, popts); err != nil {
				c.writeError(storeError(err, int64(len(val))))
				return nil
			}
		}
		var old *entry
		if e != nil && e.remote() == nil {
			old = e
		}
		swapped := false
		if old != nil {
			// The deadline carried over must still be the key's.
			swapped = c.s.ks.swapIf(old, ne, expireAt)
		} else {
			swapped = c.s.ks.swap(nil, ne)
		}
		if !swapped {
			c.s.freeValue(ne) // written meanwhile: read again
			continue
		}
		c.replaced(name, old, ne)
		c.writeInt(next)
		return nil
	}
	c.writeError("ERR the key changed under every try; retry")
	return nil
}
