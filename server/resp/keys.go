package resp

import (
	"errors"

	"github.com/yuebing/yuebing/tier"
)

// find returns the entry of a key of the connection's namespace if the key
// exists: present, not expired and, for LMCache metadata tied to a payload,
// with that payload still stored. A key found expired or orphaned is
// removed on the way (lazy expiry, as Redis does on access).
func (c *conn) find(name []byte) *entry {
	c.kbuf = compose(c.kbuf[:0], c.sp, name)
	raw := c.s.ks.get(c.kbuf)
	e := c.resolve(raw, name)
	if e == nil && raw != nil && c.s.ks.swap(raw, nil) {
		c.s.freeValue(raw)
		if !raw.liveAt(c.s.nowMs()) {
			c.s.stats.expired.Add(1)
		}
	}
	return e
}

// resolve returns raw, the table's entry for name, if the key it holds
// exists for readers, and nil otherwise.
func (c *conn) resolve(raw *entry, name []byte) *entry {
	if raw == nil || !raw.liveAt(c.s.nowMs()) || raw.paired && !c.payloadStored(raw.space, name) {
		return nil
	}
	return raw
}

// payloadStored reports whether the "<k>kv_bytes" partner of the metadata
// key name is stored right now: in the key table, not expired, and in the
// store's index, which a block leaves the moment it is evicted, before the
// OnDrop listener runs. Checking the index closes the window in which a
// reader could see metadata whose payload was just evicted.
func (c *conn) payloadStored(sp *space, name []byte) bool {
	var ok bool
	c.pbuf, ok = c.s.payloadStored(c.pbuf[:0], sp, name)
	return ok
}

// payloadStored is conn.payloadStored with dst as scratch space for the
// partner's key, returned (grown) for reuse.
func (s *Server) payloadStored(dst []byte, sp *space, name []byte) ([]byte, bool) {
	pk, isPayload := partner(dst, sp, name)
	if pk == nil || isPayload {
		return pk, false
	}
	p := s.ks.get(pk)
	return pk, p != nil && p.liveAt(s.nowMs()) && s.present(p)
}

// lookup is find for readers: a key this node does not have may be held
// by another node of the cluster.
func (c *conn) lookup(name []byte) *entry {
	if e := c.find(name); e != nil {
		return e
	}
	return c.findRemote(name)
}

// findRemote asks the cluster for a key this node does not have and
// returns a transient entry for it, or nil.
func (c *conn) findRemote(name []byte) *entry {
	if c.s.opts.Cluster == nil {
		return nil
	}
	rk, err := c.s.opts.Cluster.LookupName(c.s.ctx, c.sp.name, string(name))
	if err != nil {
		return nil
	}
	e := newEntryOf(c.sp, name, "", nil, &blockRef{key: rk.Block, size: rk.Size, remote: &rk})
	e.gen = rk.Gen
	e.expireAt.Store(rk.ExpireAtMs)
	if !e.liveAt(c.s.nowMs()) {
		return nil
	}
	return e
}

// openRemote is open for a key this node does not have. A failed read
// from the other node (it died, evicted the block, replaced the key) is a
// miss, as a cache's is. Either way the read missed this node's store:
// storeCounted says the store's Get already counted that.
func (c *conn) openRemote(name []byte, storeCounted bool) (*tier.Handle, *entry, string) {
	if !storeCounted {
		c.s.store.Missed()
	}
	e := c.findRemote(name)
	if e == nil {
		c.s.stats.misses.Add(1)
		return nil, nil, ""
	}
	h, err := c.s.opts.Cluster.ReadName(c.s.ctx, *e.remote())
	if err != nil {
		c.s.opts.Logger.Debug("resp: reading a key from another node", "node", e.remote().Node, "err", err)
		c.s.stats.misses.Add(1)
		return nil, nil, ""
	}
	c.s.stats.hits.Add(1)
	c.s.stats.remoteHits.Add(1)
	return h, e, ""
}

// LocalName reports the key namespace/name if this node holds it, for the
// cluster to answer other nodes' lookups: it exists for readers here and
// its block is in this node's store.
func (s *Server) LocalName(namespace, name string) (RemoteKey, bool) {
	e := s.ks.get([]byte(namespace + "\x00" + name))
	if e == nil || !e.liveAt(s.nowMs()) || !s.present(e) {
		return RemoteKey{}, false
	}
	if e.paired {
		if _, ok := s.payloadStored(nil, e.space, []byte(name)); !ok {
			return RemoteKey{}, false
		}
	}
	k := e.bkey()
	if e.inline {
		// Another node reads values by block: an inline one is written
		// as its block first (once; deleted with the key).
		var err error
		if k, err = s.materialize(e); err != nil {
			return RemoteKey{}, false
		}
	}
	return RemoteKey{Block: k, Size: e.size(), ExpireAtMs: e.expireAt.Load(), Gen: e.gen}, true
}

// open finds a key and pins its value. A block that vanished between the
// table lookup and the read was replaced (look again) or evicted (the key
// is gone). msg is set on a store failure. Each call is one keyspace hit
// or miss, and one hit or miss of the store, so INFO's keyspace figures
// and the store's agree on what this front end read.
func (c *conn) open(name []byte) (h *tier.Handle, e *entry, msg string) {
	storeCounted := false // the store's Get counted a miss
	for range 4 {
		e = c.find(name)
		if e == nil {
			return c.openRemote(name, storeCounted)
		}
		if e.inline {
			h, err := c.s.pin(c.s.ctx, e)
			if err == nil {
				c.s.stats.hits.Add(1)
				c.s.stats.inlineHits.Add(1)
				return h, e, ""
			}
			continue // dropped: read as missing
		}
		release, msg := c.s.admitRead(e.bkey(), e.size())
		if msg != "" {
			return nil, nil, msg
		}
		h, _, err := c.s.store.Get(c.s.ctx, e.bkey())
		if err == nil {
			c.s.stats.hits.Add(1)
			return withRelease(h, release), e, ""
		}
		if release != nil {
			release()
		}
		if !errors.Is(err, tier.ErrNotFound) && !errors.Is(err, tier.ErrCorrupt) {
			return nil, nil, storeError(err, 0)
		}
		storeCounted = true
		c.s.ks.swap(e, nil) // fails if replaced meanwhile
	}
	c.s.stats.misses.Add(1)
	return nil, nil, ""
}

func cmdGet(c *conn, args [][]byte) error {
	_, err := c.get(args[1])
	return err
}

// get answers the value of name, nil when there is none; found reports
// whether the value was written.
func (c *conn) get(name []byte) (found bool, err error) {
	h, _, msg := c.open(name)
	switch {
	case msg != "":
		c.writeError(msg)
		return false, nil
	case h == nil:
		c.writeNull()
		return false, nil
	}
	err = c.writeView(h.Bytes())
	h.Release()
	return true, err
}

// cmdMGet reads the keys one after the other, each pinned only while it is
// written, so an MGET of many large values holds one in memory at a time.
// Unlike Redis's, it is not a snapshot: a key set meanwhile may be seen
// new while an earlier one was seen old.
func cmdMGet(c *conn, args [][]byte) error {
	c.writeArray(len(args) - 1)
	for _, name := range args[1:] {
		h, _, _ := c.open(name)
		if h == nil {
			c.writeNull()
			continue
		}
		err := c.writeView(h.Bytes())
		h.Release()
		if err == nil {
			err = c.maybeFlush()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func cmdStrlen(c *conn, args [][]byte) error {
	if e := c.lookup(args[1]); e != nil {
		c.writeInt(e.size())
	} else {
		c.writeInt(0)
	}
	return nil
}

// cmdGetRange writes a slice of the value straight from the store's pinned
// view: nothing but the slice is copied, and a DRAM-resident value is not
// read beyond it. (The SSD tier reads and verifies a whole block.)
func cmdGetRange(c *conn, args [][]byte) error {
	start, ok1 := parseInt(args[2])
	end, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		c.writeError(errInt)
		return nil
	}
	if start < 0 && end < 0 && start > end {
		c.writeBulk(nil)
		return nil
	}
	h, _, msg := c.open(args[1])
	switch {
	case msg != "":
		c.writeError(msg)
		return nil
	case h == nil:
		c.writeBulk(nil)
		return nil
	}
	defer h.Release()
	n := int64(h.Len())
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), max(end, 0)
	end = min(end, n-1)
	if start > end || n == 0 {
		c.writeBulk(nil)
		return nil
	}
	return c.writeView(h.Bytes()[start : end+1])
}

func cmdExists(c *conn, args [][]byte) error {
	n := 0
	for _, name := range args[1:] {
		if c.lookup(name) != nil {
			n++
		}
	}
	c.writeInt(int64(n))
	return nil
}

func cmdDel(c *conn, args [][]byte) error {
	n := 0
	for _, name := range args[1:] {
		if c.del(name) {
			n++
		}
	}
	c.writeInt(int64(n))
	return nil
}

// del deletes name here and, in a cluster, everywhere; it reports whether
// a value was deleted.
func (c *conn) del(name []byte) bool {
	deleted := false
	if e := c.find(name); e != nil && c.s.ks.swap(e, nil) {
		c.s.freeValue(e)
		deleted = true
	}
	if c.deletedHere(name) {
		deleted = true
	}
	return deleted
}

// cmdGetDel answers the value, then deletes the key.
func cmdGetDel(c *conn, args [][]byte) error {
	found, err := c.get(args[1])
	if found {
		c.del(args[1])
	}
	return err
}

func cmdType(c *conn, args [][]byte) error {
	if c.lookup(args[1]) != nil {
		c.writeSimple("string")
	} else {
		c.writeSimple("none")
	}
	return nil
}
