package resp

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
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
	if e == nil && raw != nil && c.s.ks.swap(raw.key, raw, nil) {
		c.s.store.Delete(raw.bkey)
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
	return pk, p != nil && p.liveAt(s.nowMs()) && s.store.Contains(p.bkey)
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
	e := &entry{key: c.sp.name + "\x00" + string(name), space: c.sp, bkey: rk.Block, size: rk.Size, remote: &rk}
	e.expireAt.Store(rk.ExpireAtMs)
	if !e.liveAt(c.s.nowMs()) {
		return nil
	}
	return e
}

// openRemote is open for a key this node does not have. A failed read
// from the other node (it died, evicted the block, replaced the key) is a
// miss, as a cache's is.
func (c *conn) openRemote(name []byte) (*tier.Handle, *entry, string) {
	e := c.findRemote(name)
	if e == nil {
		c.s.stats.misses.Add(1)
		return nil, nil, ""
	}
	h, err := c.s.opts.Cluster.ReadName(c.s.ctx, *e.remote)
	if err != nil {
		c.s.opts.Logger.Debug("resp: reading a key from another node", "node", e.remote.Node, "err", err)
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
	if e == nil || !e.liveAt(s.nowMs()) || !s.store.Contains(e.bkey) {
		return RemoteKey{}, false
	}
	if e.paired {
		if _, ok := s.payloadStored(nil, e.space, []byte(name)); !ok {
			return RemoteKey{}, false
		}
	}
	return RemoteKey{Block: e.bkey, Size: e.size, ExpireAtMs: e.expireAt.Load()}, true
}

// open finds a key and pins its value. A block that vanished between the
// table lookup and the read was replaced (look again) or evicted (the key
// is gone). msg is set on a store failure.
func (c *conn) open(name []byte) (h *tier.Handle, e *entry, msg string) {
	for range 4 {
		e = c.find(name)
		if e == nil {
			return c.openRemote(name)
		}
		h, _, err := c.s.store.Get(c.s.ctx, e.bkey)
		if err == nil {
			c.s.stats.hits.Add(1)
			return h, e, ""
		}
		if !errors.Is(err, tier.ErrNotFound) && !errors.Is(err, tier.ErrCorrupt) {
			return nil, nil, storeError(err, 0)
		}
		c.s.ks.swap(e.key, e, nil) // fails if replaced meanwhile
	}
	c.s.stats.misses.Add(1)
	return nil, nil, ""
}

func cmdGet(c *conn, args [][]byte) error {
	h, _, msg := c.open(args[1])
	switch {
	case msg != "":
		c.writeError(msg)
		return nil
	case h == nil:
		c.writeNull()
		return nil
	}
	err := c.writeView(h.Bytes())
	h.Release()
	return err
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
		c.writeInt(e.size)
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
		if e := c.find(name); e != nil && c.s.ks.swap(e.key, e, nil) {
			c.s.store.Delete(e.bkey)
			n++
		}
	}
	c.writeInt(int64(n))
	return nil
}

func cmdType(c *conn, args [][]byte) error {
	if c.lookup(args[1]) != nil {
		c.writeSimple("string")
	} else {
		c.writeSimple("none")
	}
	return nil
}

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

func cmdExpire(c *conn, args [][]byte) error  { return expire(c, args, 1000, "expire") }
func cmdPExpire(c *conn, args [][]byte) error { return expire(c, args, 1, "pexpire") }

// expire is EXPIRE and PEXPIRE with Redis 7's NX, XX, GT and LT. The new
// deadline holds while the server runs; the value's block keeps the one it
// was written with (docs/resp.md, "Expiry").
func expire(c *conn, args [][]byte, unit int64, name string) error {
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
	if n > math.MaxInt64/unit || n < math.MinInt64/unit || n*unit > 0 && now > math.MaxInt64-n*unit {
		c.writeError("ERR invalid expire time in '" + name + "' command")
		return nil
	}
	at := now + n*unit
	e := c.find(args[1])
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
	if at <= now {
		if c.s.ks.swap(e.key, e, nil) {
			c.s.store.Delete(e.bkey)
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
	if e == nil || e.expireAt.Load() == 0 || !c.s.ks.setExpiry(e, 0) {
		c.writeInt(0)
		return nil
	}
	c.writeInt(1)
	return nil
}

// setOpts are SET's options.
type setOpts struct {
	nx, xx, get, keepTTL bool
	expireAt             int64 // Unix ms; 0 for none
}

// parseSetOpts parses SET's options as Redis 7 does: flags first (a
// conflict is a syntax error), then the expiry's number.
func (c *conn) parseSetOpts(args [][]byte) (setOpts, string) {
	var o setOpts
	var ex, px, exat, pxat bool
	var num []byte
	for i := 0; i < len(args); i++ {
		a := args[i]
		hasNext := i+1 < len(args)
		timed := ex || px || exat || pxat
		switch {
		case eq(a, "nx") && !o.xx:
			o.nx = true
		case eq(a, "xx") && !o.nx:
			o.xx = true
		case eq(a, "get"):
			o.get = true
		case eq(a, "keepttl") && !timed:
			o.keepTTL = true
		case eq(a, "ex") && !o.keepTTL && !px && !exat && !pxat && hasNext:
			ex, num = true, args[i+1]
			i++
		case eq(a, "px") && !o.keepTTL && !ex && !exat && !pxat && hasNext:
			px, num = true, args[i+1]
			i++
		case eq(a, "exat") && !o.keepTTL && !ex && !px && !pxat && hasNext:
			exat, num = true, args[i+1]
			i++
		case eq(a, "pxat") && !o.keepTTL && !ex && !px && !exat && hasNext:
			pxat, num = true, args[i+1]
			i++
		default:
			return o, errSyntax
		}
	}
	if num == nil {
		return o, ""
	}
	ms, ok := parseInt(num)
	if !ok {
		return o, errInt
	}
	const invalid = "ERR invalid expire time in 'set' command"
	if ms <= 0 || (ex || exat) && ms > math.MaxInt64/1000 {
		return o, invalid
	}
	if ex || exat {
		ms *= 1000
	}
	if ex || px {
		now := c.s.nowMs()
		if ms > math.MaxInt64-now {
			return o, invalid
		}
		ms += now
	}
	o.expireAt = ms
	return o, ""
}

// checkKey returns an error reply for a key that cannot be stored.
func (c *conn) checkKey(name []byte) string {
	if m := maxKeyLen(c.sp.name); len(name) > m {
		return fmt.Sprintf("ERR key of %d bytes is longer than the %d bytes allowed", len(name), m)
	}
	return ""
}

// newEntry prepares the entry, block key and record of a new value of name.
func (c *conn) newEntry(name []byte, size, expireAt int64) (*entry, tier.PutOptions) {
	gen := c.s.nextGen()
	e := &entry{
		key:   string(compose(nil, c.sp, name)),
		space: c.sp,
		bkey:  blockKey(c.sp.name, name, gen),
		size:  size,
	}
	if _, isPayload := partner(nil, c.sp, name); !isPayload && c.payloadStored(c.sp, name) {
		e.paired = true
	}
	e.expireAt.Store(expireAt)
	rec := record{gen: gen, expireAt: expireAt, ns: c.sp.name, name: string(name)}
	if e.paired {
		rec.flags |= flagPaired
	}
	return e, tier.PutOptions{Meta: rec.appendTo(make([]byte, 0, recordLen(c.sp.name, len(name))))}
}

// readKey reads the key argument of SET or MSET. A key that is too long or
// not allowed is answered with an error and the rest of the command is
// skipped; ok is then false and err is what skipping returned.
func (c *conn) readKey() (name []byte, ok bool, err error) {
	name, big, err := c.r.next()
	if err != nil {
		return nil, false, err
	}
	msg := c.checkKey(name)
	if big > 0 {
		msg = fmt.Sprintf("ERR key of %d bytes is longer than the %d bytes allowed", big, maxKeyLen(c.sp.name))
	}
	if msg != "" {
		c.writeError(msg)
		return nil, false, c.r.skipRest()
	}
	return name, true, nil
}

// cmdSet reads SET's arguments itself: a value longer than smallArg goes
// from the socket straight into a block the store reserved for it, before
// the options that follow it are read; if they set a deadline, the block is
// rewritten once with it in its record (see rewrite).
func cmdSet(c *conn, n int) error {
	name, ok, err := c.readKey()
	if !ok {
		return err
	}
	val, vbig, err := c.r.next()
	if err != nil {
		return err
	}
	if vbig == 0 {
		args, tooLong, err := c.r.rest()
		if err != nil {
			return err
		}
		if tooLong {
			c.writeError(errSyntax)
			return nil
		}
		o, msg := c.parseSetOpts(args[3:])
		if msg != "" {
			c.writeError(msg)
			return nil
		}
		return c.setSmall(name, val, o, true)
	}
	return c.setStreamed(name, vbig, func() (setOpts, string, error) {
		args, tooLong, err := c.r.rest()
		if err != nil || tooLong {
			return setOpts{}, errSyntax, err
		}
		o, msg := c.parseSetOpts(args[2:])
		return o, msg, nil
	}, true)
}

// setSmall stores a value that was read whole.
func (c *conn) setSmall(name, val []byte, o setOpts, reply bool) error {
	expireAt := o.expireAt
	if o.nx || o.xx || o.keepTTL {
		cur := c.find(name)
		if o.nx && cur != nil || o.xx && cur == nil {
			return c.setSkipped(name, o)
		}
		if o.keepTTL && cur != nil {
			expireAt = cur.expireAt.Load()
		}
	}
	e, popts := c.newEntry(name, int64(len(val)), expireAt)
	if _, err := c.s.store.Put(c.s.ctx, e.bkey, val, popts); err != nil {
		c.writeError(storeError(err, int64(len(val))))
		return nil
	}
	return c.install(name, e, o, reply)
}

// setStreamed streams a value of size bytes into the store, then reads the
// command's options with rest.
func (c *conn) setStreamed(name []byte, size int64, rest func() (setOpts, string, error), reply bool) error {
	if size > c.s.opts.MaxValueSize {
		// Refused before reading: the client hears so at once, and the
		// value is skipped without being held.
		c.writeError(fmt.Sprintf("ERR value of %d bytes is larger than the maximum of %d", size, c.s.opts.MaxValueSize))
		if err := c.flush(); err != nil {
			return err
		}
		return c.r.skipRest()
	}
	e, popts := c.newEntry(name, size, 0)
	w, err := c.s.store.Create(c.s.ctx, e.bkey, size, popts)
	if err != nil {
		if err := c.r.skipRest(); err != nil {
			return err
		}
		c.writeError(storeError(err, size))
		return nil
	}
	if err := c.r.stream(w); err != nil {
		w.Abort()
		return err
	}
	o, msg, err := rest()
	if err != nil || msg != "" {
		w.Abort()
		if err == nil {
			c.writeError(msg)
		}
		return err
	}
	if o.expireAt != 0 {
		e.expireAt.Store(o.expireAt)
	}
	if o.nx || o.xx {
		cur := c.find(name)
		if o.nx && cur != nil || o.xx && cur == nil {
			w.Abort()
			return c.setSkipped(name, o)
		}
	}
	if err := w.Commit(c.s.ctx); err != nil {
		c.writeError(storeError(err, size))
		return nil
	}
	if o.keepTTL {
		if cur := c.find(name); cur != nil {
			e.expireAt.Store(cur.expireAt.Load())
		}
	}
	if e.expireAt.Load() != 0 {
		e = c.rewrite(name, e)
	}
	return c.install(name, e, o, reply)
}

// rewrite copies the just-written block of e into a new generation whose
// record carries e's deadline, which was not known when the value started
// streaming, so that the deadline survives a restart. It costs one copy of
// the value; if the store cannot make room for it, e is kept and its
// deadline holds while the server runs.
func (c *conn) rewrite(name []byte, e *entry) *entry {
	h, _, err := c.s.store.Get(c.s.ctx, e.bkey)
	if err != nil {
		return e
	}
	defer h.Release()
	ne, popts := c.newEntry(name, e.size, e.expireAt.Load())
	if _, err := c.s.store.Put(c.s.ctx, ne.bkey, h.Bytes(), popts); err != nil {
		return e
	}
	c.s.store.Delete(e.bkey)
	return ne
}

// setSkipped answers a SET whose NX or XX condition failed.
func (c *conn) setSkipped(name []byte, o setOpts) error {
	if !o.get {
		c.writeNull()
		return nil
	}
	h, _, _ := c.open(name)
	if h == nil {
		c.writeNull()
		return nil
	}
	defer h.Release()
	return c.writeView(h.Bytes())
}

// install makes the stored block e the key's value, subject to NX and XX,
// and deletes the block it replaces. The table switches in one step, so a
// concurrent GET reads the old value or the new one, never neither.
func (c *conn) install(name []byte, e *entry, o setOpts, reply bool) error {
	key := []byte(e.key)
	for {
		raw := c.s.ks.get(key)
		cur := c.resolve(raw, name)
		if o.nx && cur != nil || o.xx && cur == nil {
			c.s.store.Delete(e.bkey)
			return c.setSkipped(name, o)
		}
		var old *tier.Handle
		if o.get && cur != nil {
			if h, _, err := c.s.store.Get(c.s.ctx, cur.bkey); err == nil {
				old = h
			}
		}
		if o.keepTTL && cur != nil {
			e.expireAt.Store(cur.expireAt.Load())
		}
		if !c.s.ks.swap(e.key, raw, e) {
			if old != nil {
				old.Release()
			}
			continue
		}
		if raw != nil {
			c.s.store.Delete(raw.bkey)
		}
		if !c.s.store.Contains(e.bkey) {
			c.s.ks.swap(e.key, e, nil) // evicted before it was in the table
		}
		c.s.stats.sets.Add(1)
		if !reply {
			if old != nil {
				old.Release()
			}
			return nil
		}
		switch {
		case !o.get:
			c.writeOK()
		case old == nil:
			c.writeNull()
		default:
			err := c.writeView(old.Bytes())
			old.Release()
			return err
		}
		return nil
	}
}

// cmdMSet stores pair after pair as they arrive, streaming long values like
// SET. It is not atomic: a reader may see the first pairs before the last
// are stored, and if one fails the ones before it stay.
func cmdMSet(c *conn, n int) error {
	if n%2 == 0 {
		c.writeError("ERR wrong number of arguments for 'mset' command")
		return c.r.skipRest()
	}
	for c.r.remaining > 0 {
		name, ok, err := c.readKey()
		if !ok {
			return err
		}
		val, vbig, err := c.r.next()
		if err != nil {
			return err
		}
		before := c.errs
		if vbig == 0 {
			err = c.setSmall(name, val, setOpts{}, false)
		} else {
			err = c.setStreamed(name, vbig, func() (setOpts, string, error) { return setOpts{}, "", nil }, false)
		}
		if err != nil {
			return err
		}
		if c.errs != before { // the pair failed and was answered
			return c.r.skipRest()
		}
		c.r.forget()
	}
	c.writeOK()
	return nil
}

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
	next := c.s.store.Scan(cursor, int(min(count, 1<<20)), func(k block.Key, _ index.Entry) bool {
		if e := c.s.ks.byBlock(k); e != nil && e.space == c.sp && e.liveAt(now) &&
			(pattern == nil || match(pattern, []byte(e.name()))) {
			found = append(found, e)
		}
		return true
	})
	c.writeArray(2)
	c.writeBulkString(strconv.FormatUint(next, 10))
	if !typeOK {
		c.writeArray(0)
		return nil
	}
	return c.writeNames(c.visible(found))
}

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
		if c.s.ks.swap(e.key, e, nil) {
			c.s.store.Delete(e.bkey)
		}
	}
	c.writeOK()
	return nil
}
