package resp

import (
	"sync"
	"time"

	"github.com/yuebing/yuebing/tier"
)

// warnEvery bounds how often a failure that repeats with every write (a
// peer down until its lease ends) is logged.
const warnEvery = 10 * time.Second

// sometimes logs a repeating warning once per warnEvery, with how many it
// left out since the last one.
type sometimes struct {
	mu      sync.Mutex
	last    time.Time
	skipped int
}

// allow reports whether to log now, and how many were left out before.
func (l *sometimes) allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < warnEvery {
		l.skipped++
		return false, 0
	}
	n := l.skipped
	l.last, l.skipped = now, 0
	return true, n
}

// One keyspace across a cluster's front ends (Options.Cluster): a key
// lives on the node that last wrote it. A SET or DEL here tells every other
// node before it is acknowledged, and each drops a value it holds of an
// older generation; the generations are node clocks moved past every
// generation heard of, so of two writes of one key the later one's stays
// and the other node drops its own (writtenHere). Reads of a key this node
// lacks ask the others (findRemote); EXPIRE and PERSIST of such a key
// change it on its node (expireRemote).

// writtenHere tells the other nodes that e is name's value now. If one of
// them holds a later value, this write lost the race and e goes.
func (c *conn) writtenHere(name []byte, e *entry) {
	if c.s.opts.Cluster == nil {
		return
	}
	_, newer, err := c.s.opts.Cluster.ForgetName(c.s.ctx, c.sp.name, string(name), e.gen)
	if err != nil {
		if ok, skipped := c.s.setWarn.allow(time.Now()); ok {
			c.s.opts.Logger.Warn("resp: a SET did not reach every node; those keep an older value until written again", "err", err, "like_since_last", skipped)
		}
	}
	if newer && c.s.ks.swap(e, nil) {
		c.s.freeValue(e)
	}
}

// deletedHere tells the other nodes that name was deleted and reports
// whether one of them held it.
func (c *conn) deletedHere(name []byte) bool {
	if c.s.opts.Cluster == nil {
		return false
	}
	dropped, _, err := c.s.opts.Cluster.ForgetName(c.s.ctx, c.sp.name, string(name), c.s.nextGen())
	if err != nil {
		if ok, skipped := c.s.delWarn.allow(time.Now()); ok {
			c.s.opts.Logger.Warn("resp: a DEL did not reach every node; those keep the key until written again", "err", err, "like_since_last", skipped)
		}
	}
	return dropped > 0
}

// expireRemote sets the deadline of e, a key another node holds, there: 1
// if it did, 0 if the key changed meanwhile or the node did not answer.
func (c *conn) expireRemote(name []byte, e *entry, at int64) int64 {
	ok, err := c.s.opts.Cluster.ExpireName(c.s.ctx, *e.remote(), c.sp.name, string(name), at)
	if err != nil || !ok {
		return 0
	}
	return 1
}

// openRemoteValue pins the value of name held on another node, for SET's
// GET option.
func (c *conn) openRemoteValue(name []byte) (*tier.Handle, *entry) {
	e := c.findRemote(name)
	if e == nil {
		return nil, nil
	}
	h, err := c.s.opts.Cluster.ReadName(c.s.ctx, *e.remote())
	if err != nil {
		return nil, e
	}
	return h, e
}

// ForgetLocal applies another node's write or delete of namespace/name at
// generation gen: a value held here of an older generation goes (dropped);
// newer reports a value held here of a later one. Of two at the same
// generation the incoming one wins if winsTie (the nodes agree on it by
// their ids). This node's clock moves past gen, so its next write of the
// key orders after the one it heard of.
func (s *Server) ForgetLocal(namespace, name string, gen uint64, winsTie bool) (dropped, newer bool) {
	for {
		cur := s.gen.Load()
		if cur >= gen || s.gen.CompareAndSwap(cur, gen) {
			break
		}
	}
	e := s.ks.get([]byte(namespace + "\x00" + name))
	switch {
	case e == nil:
		return false, false
	case e.gen > gen, e.gen == gen && !winsTie:
		return false, e.liveAt(s.nowMs())
	}
	if s.ks.swap(e, nil) {
		s.freeValue(e)
		return e.liveAt(s.nowMs()), false
	}
	return false, false
}

// ExpireLocal sets the deadline of namespace/name to at (0: none; past:
// delete it) if this node holds it at generation gen.
func (s *Server) ExpireLocal(namespace, name string, gen uint64, at int64) bool {
	e := s.ks.get([]byte(namespace + "\x00" + name))
	if e == nil || e.gen != gen || !e.liveAt(s.nowMs()) {
		return false
	}
	if at != 0 && at <= s.nowMs() {
		if s.ks.swap(e, nil) {
			s.freeValue(e)
			return true
		}
		return false
	}
	return s.ks.setExpiry(e, at)
}
