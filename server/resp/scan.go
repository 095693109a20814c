package resp

import (
	"strconv"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

func cmdDBSize(c *conn, _ [][]byte) error {
	c.writeInt(max(c.sp.keys.Load(), 0))
	return nil
}

// cmdScan walks the store's index with its stable cursor and returns the
// keys of the caller's namespace among the COUNT blocks it visits: like
// Redis's SCAN, it may return fewer keys than COUNT, or none, before the
// cursor comes back to 0, and a key present throughout is returned at
// least once.
func cmdScan(c *conn, args [][]byte) error {
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		c.writeError("ERR invalid cursor")
		return nil
	}
	count := int64(10)
	var pattern []byte
	typeOK := true
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			c.writeError(errSyntax)
			return nil
		}
		switch a, v := args[i], args[i+1]; {
		case eq(a, "count"):
			n, ok := parseInt(v)
			if !ok {
				c.writeError(errInt)
				return nil
			}
			if n < 1 {
				c.writeError(errSyntax)
				return nil
			}
			count = n
		case eq(a, "match"):
			pattern = v
		case eq(a, "type"):
			typeOK = eq(v, "string")
		default:
			c.writeError(errSyntax)
			return nil
		}
	}
	now := c.s.nowMs()
	var found []*entry
	keep := func(e *entry) {
		if e.space == c.sp && e.liveAt(now) && (pattern == nil || match(pattern, []byte(e.name()))) {
			found = append(found, e)
		}
	}
	next := uint64(0)
	budget := min(count, 1<<20)
	if cursor&inlinePhase == 0 {
		visited := int64(0)
		next = c.s.store.Scan(cursor, int(budget), func(k block.Key, _ index.Entry) bool {
			visited++
			if e := c.s.ks.byBlock(k); e != nil {
				keep(e)
			}
			return true
		})
		budget -= visited
		if next == 0 {
			cursor = inlinePhase // on to the inline values
		}
	}
	if next == 0 {
		// Inline values are in no block: the table's shards are visited
		// one at a time, each whole, so a key present throughout is
		// returned once.
		i := cursor &^ inlinePhase
		for first := true; i < shards && (budget > 0 || first); i++ {
			first = false // each call visits a shard at least
			budget -= c.s.ks.eachInline(int(i), keep)
		}
		if i < shards {
			next = inlinePhase | i
		}
	}
	c.writeArray(2)
	c.writeBulkString(strconv.FormatUint(next, 10))
	if !typeOK {
		c.writeArray(0)
		return nil
	}
	return c.writeNames(c.visible(found))
}

// inlinePhase marks a SCAN cursor past the store's blocks, among the
// table's inline values; the store's cursors leave the bit clear (their
// shard number is in the high word and far below 1<<30).
const inlinePhase = 1 << 62

// writeNames answers with an array of key names, flushing as it goes.
func (c *conn) writeNames(names []string) error {
	c.writeArray(len(names))
	for _, n := range names {
		c.writeBulkString(n)
		if err := c.maybeFlush(); err != nil {
			return err
		}
	}
	return nil
}

// visible drops LMCache metadata whose payload is gone from a listing.
func (c *conn) visible(es []*entry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		if e.paired && !c.payloadStored(e.space, []byte(e.name())) {
			continue
		}
		out = append(out, e.name())
	}
	return out
}

func cmdKeys(c *conn, args [][]byte) error {
	now := c.s.nowMs()
	var found []*entry
	all := len(args[1]) == 1 && args[1][0] == '*'
	c.s.ks.each(c.sp, func(e *entry) bool {
		if e.liveAt(now) && (all || match(args[1], []byte(e.name()))) {
			found = append(found, e)
		}
		return true
	})
	return c.writeNames(c.visible(found))
}

func cmdFlushDB(c *conn, args [][]byte) error  { return flush(c, args, c.sp) }
func cmdFlushAll(c *conn, args [][]byte) error { return flush(c, args, nil) }

// flush deletes every key of sp (of every namespace when sp is nil). ASYNC
// and SYNC are accepted; both delete before replying.
func flush(c *conn, args [][]byte, sp *space) error {
	for _, a := range args[1:] {
		if !eq(a, "async") && !eq(a, "sync") || len(args) > 2 {
			c.writeError(errSyntax)
			return nil
		}
	}
	var es []*entry
	c.s.ks.each(sp, func(e *entry) bool {
		es = append(es, e)
		return true
	})
	for _, e := range es {
		if c.s.ks.swap(e, nil) {
			c.s.freeValue(e)
		}
	}
	c.writeOK()
	return nil
}
