package resp

import (
	"fmt"
	"math"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// setOpts are SET's options.
type setOpts struct {
	nx, xx, get, keepTTL bool
	expireAt             int64 // Unix ms; 0 for none
	// intReply answers :1 for a value set and :0 for one skipped (SETNX).
	intReply bool
	// retain is the RETENTION option (retention.go).
	retain retainOpt
	// parent is YUEBING.PARENT's key, the chain parent of a value stored
	// as a block (chainParent); nil for none.
	parent []byte
}

// optParent is SET's chain parent option. Redis's own options are single
// words; the prefix keeps this one clear of any Redis may add.
const optParent = "yuebing.parent"

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
		case eq(a, "retention") && !o.retain.set:
			r, used, msg := parseRetainOpt(args[i+1:])
			if msg != "" {
				return o, msg
			}
			o.retain = r
			i += used
		case eq(a, optParent) && o.parent == nil:
			if !hasNext {
				return o, errSyntax
			}
			p := args[i+1]
			if m := maxKeyLen(c.sp.name); len(p) > m {
				return o, fmt.Sprintf("ERR YUEBING.PARENT key of %d bytes is longer than the %d bytes allowed", len(p), m)
			}
			o.parent = p
			i++
		default:
			return o, errSyntax
		}
	}
	if num == nil {
		return o, ""
	}
	var msg string
	o.expireAt, msg = c.deadline(num, ex || exat, ex || px, "set")
	return o, msg
}

// deadline turns the expiry argument num of cmd, in seconds or
// milliseconds, relative to now or a Unix time, into a Unix-ms deadline,
// with Redis's errors: not an integer, or not positive, or past int64.
func (c *conn) deadline(num []byte, seconds, relative bool, cmd string) (int64, string) {
	ms, ok := parseInt(num)
	if !ok {
		return 0, errInt
	}
	invalid := "ERR invalid expire time in '" + cmd + "' command"
	if ms <= 0 || seconds && ms > math.MaxInt64/1000 {
		return 0, invalid
	}
	if seconds {
		ms *= 1000
	}
	if relative {
		now := c.s.nowMs()
		if ms > math.MaxInt64-now {
			return 0, invalid
		}
		ms += now
	}
	return ms, ""
}

// checkParent returns an error reply for a YUEBING.PARENT of o that
// cannot be the parent of name: the key itself, whose old value the SET
// replaces.
func checkParent(name []byte, o setOpts) string {
	if o.parent != nil && string(o.parent) == string(name) {
		return "ERR YUEBING.PARENT names the key being set"
	}
	return ""
}

// chainParent returns the block of the YUEBING.PARENT key of o, for the
// store's SSD admission (docs/policies.md): the parent's current value,
// when it is held as a block. A parent missing here (never set, evicted,
// or on another node) or kept inline gives none, and the value is
// admitted as one without a chain: refusing it for a parent this node
// cannot see would refuse every chain a cluster spreads across nodes.
func (c *conn) chainParent(o setOpts) (block.Key, bool) {
	if o.parent == nil {
		return block.Key{}, false
	}
	p := c.find(o.parent)
	if p == nil || p.inline || p.blk == nil {
		return block.Key{}, false
	}
	return p.bkey(), true
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
	e := newEntryOf(c.sp, name, "", nil, &blockRef{key: blockKey(c.sp.name, name, gen), size: size})
	e.gen = gen
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
		if msg == "" {
			msg = checkParent(name, o)
		}
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
		if msg == "" {
			msg = checkParent(name, o)
		}
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
	if c.s.inlineOK(len(val)) && !o.retain.keepsBlock() {
		return c.install(name, c.newInline(name, val, expireAt), o, reply)
	}
	e, popts := c.newEntry(name, int64(len(val)), expireAt)
	popts.Parent, popts.HasParent = c.chainParent(o)
	if _, err := c.s.store.Put(c.s.ctx, e.bkey(), val, popts); err != nil {
		c.writeError(storeError(err, int64(len(val))))
		return nil
	}
	if !c.retainStored(e, o.retain) {
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
	release, msg := c.s.admit(size)
	if msg != "" {
		// Refused before reading, like a value over MaxValueSize: the
		// value is discarded through the read buffer, never held.
		c.writeError(msg)
		if err := c.flush(); err != nil {
			return err
		}
		return c.r.skipRest()
	}
	defer release()
	e, popts := c.newEntry(name, size, 0)
	w, err := c.s.store.Create(c.s.ctx, e.bkey(), size, popts)
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
	if parent, ok := c.chainParent(o); ok || e.expireAt.Load() != 0 {
		e = c.rewrite(name, e, parent, ok)
	}
	if !c.retainStored(e, o.retain) {
		return nil
	}
	return c.install(name, e, o, reply)
}

// rewrite copies the just-written block of e into a new generation whose
// record carries e's deadline, and whose put carries the chain parent
// (hasParent), neither of which was known when the value started
// streaming: the deadline then survives a restart and the store's
// admission sees the chain. It costs one copy of the value; if the store
// cannot make room for it, or the in-flight budget for the copy when the
// value sits below DRAM, e is kept: its deadline holds while the server
// runs, and it is admitted as a value without a parent.
func (c *conn) rewrite(name []byte, e *entry, parent block.Key, hasParent bool) *entry {
	release, msg := c.s.admitRead(e.bkey(), e.size())
	if msg != "" {
		return e
	}
	if release != nil {
		defer release()
	}
	h, _, err := c.s.store.Get(c.s.ctx, e.bkey())
	if err != nil {
		return e
	}
	defer h.Release()
	ne, popts := c.newEntry(name, e.size(), e.expireAt.Load())
	popts.Parent, popts.HasParent = parent, hasParent
	if _, err := c.s.store.Put(c.s.ctx, ne.bkey(), h.Bytes(), popts); err != nil {
		return e
	}
	c.s.store.Delete(e.bkey())
	return ne
}

// setSkipped answers a SET whose NX or XX condition failed.
func (c *conn) setSkipped(name []byte, o setOpts) error {
	if o.intReply {
		c.writeInt(0)
		return nil
	}
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
	c.keyBuf = compose(c.keyBuf[:0], c.sp, name)
	key := c.keyBuf
	for {
		raw := c.s.ks.get(key)
		cur := c.resolve(raw, name)
		if cur == nil && (o.nx || o.xx || o.keepTTL) {
			// The key may live on another node: its value is the one NX,
			// XX and KEEPTTL see.
			cur = c.findRemote(name)
		}
		if o.nx && cur != nil || o.xx && cur == nil {
			c.s.freeValue(e)
			return c.setSkipped(name, o)
		}
		var old *tier.Handle
		if o.get && cur != nil {
			if h, err := c.s.pin(c.s.ctx, cur); err == nil {
				old = h
			}
		}
		if o.get && cur == nil && c.s.opts.Cluster != nil {
			old, cur = c.openRemoteValue(name)
		}
		if o.keepTTL && cur != nil {
			e.expireAt.Store(cur.expireAt.Load())
		}
		if !c.s.ks.swap(raw, e) {
			if old != nil {
				old.Release()
			}
			continue
		}
		c.replaced(name, raw, e)
		if !reply {
			if old != nil {
				old.Release()
			}
			return nil
		}
		switch {
		case o.intReply:
			c.writeInt(1)
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

// setWith stores the value that comes next, the rest of the command, with
// o: SETEX, PSETEX, SETNX and GETSET are SET with options, their value
// last, streamed when long as SET streams it.
func (c *conn) setWith(name []byte, o setOpts) error {
	val, vbig, err := c.r.next()
	if err != nil {
		return err
	}
	if vbig == 0 {
		return c.setSmall(name, val, o, true)
	}
	return c.setStreamed(name, vbig, func() (setOpts, string, error) { return o, "", nil }, true)
}

// cmdSetEx is SETEX key seconds value, and with ms PSETEX.
func cmdSetEx(ms bool) func(c *conn, n int) error {
	return func(c *conn, n int) error {
		name, ok, err := c.readKey()
		if !ok {
			return err
		}
		num, big, err := c.r.next()
		if err != nil {
			return err
		}
		cmd := "setex"
		if ms {
			cmd = "psetex"
		}
		var t int64
		msg := errInt // an argument too long to buffer is no integer
		if big == 0 {
			t, msg = c.deadline(num, !ms, true, cmd)
		}
		if msg != "" {
			c.writeError(msg)
			return c.r.skipRest()
		}
		return c.setWith(name, setOpts{expireAt: t})
	}
}

func cmdSetNX(c *conn, n int) error {
	name, ok, err := c.readKey()
	if !ok {
		return err
	}
	return c.setWith(name, setOpts{nx: true, intReply: true})
}

func cmdGetSet(c *conn, n int) error {
	name, ok, err := c.readKey()
	if !ok {
		return err
	}
	return c.setWith(name, setOpts{get: true})
}

// replaced finishes a write once the table holds e in place of raw (nil
// for none): the old block goes, a block evicted before it was in the table
// leaves it, and the other nodes drop older values.
func (c *conn) replaced(name []byte, raw, e *entry) {
	if raw != nil {
		c.s.freeValue(raw)
	}
	if !c.s.present(e) {
		c.s.ks.swap(e, nil) // evicted before it was in the table
	}
	c.writtenHere(name, e)
	c.s.stats.sets.Add(1)
	if e.inline && c.s.ks.inlineBytes.Load() > c.s.inlineLimit() {
		c.s.fitInline()
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
