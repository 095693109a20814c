package resp

import (
	"bytes"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/expiry"
)

// The key table maps each Redis key (namespace, name) to the block holding
// its current value, and each such block back to its key. Reads go through
// it, so it decides what exists: a block in the store that the table does
// not point to (an older generation, one whose key was deleted) is
// invisible and on its way out. It lives in memory and is rebuilt from the
// blocks' records at start-up (Server.load).
//
// Memory: one 64-byte entry per key, its table key and inline value in
// one allocation beside it, a 9-byte slot in its shard's table (table.go),
// and for a block value a blockRef and a slot in the block map
// (TestInlineMemory, TestKeyTableMemory; docs/resp.md).

// entry is one key. Its fields are immutable except expireAt, which is
// guarded by the name shard's mutex.
//
// It is laid out for millions of small keys (docs/resp.md, "Memory per
// key"): 64 bytes, a single size class, with the table key and an inline
// value in one allocation behind p, and what only block values need
// behind blk, nil for inline ones.
type entry struct {
	// p points to the key's name (klen bytes; the namespace is space's)
	// followed by an inline value (vlen bytes). The name's bytes never
	// change.
	p     unsafe.Pointer
	space *space
	blk   *blockRef // the block holding the value; nil for an inline value
	gen   uint64    // the value's generation (blockKey); orders writes across nodes
	// expireAt is the deadline in Unix milliseconds, 0 for none. It is
	// written under the name shard's lock and read without it.
	expireAt atomic.Int64
	klen     uint32
	vlen     uint32
	// crc is an inline value's CRC-32C.
	crc uint32
	// used is the inline clock (Server.tick) at the last read or write,
	// for eviction.
	used   atomic.Uint32
	paired bool // see flagPaired
	// An inline value (inline.go) lives here rather than in a block of
	// the store. mat is set once the value was also written as block
	// blockKey(space, name, gen), for another node to read or to outlive
	// a restart.
	inline bool
	mat    atomic.Bool
}

// blockRef is what an entry whose value is a block needs beyond an
// inline one.
type blockRef struct {
	key  block.Key
	size int64
	// remote is set on a transient entry for a key another node holds
	// (conn.findRemote); such an entry is never in the table.
	remote *RemoteKey
}

// newEntryOf returns an entry of name (given as name or nameStr) in sp
// whose value is val, inline when ref is nil. Name and value are copied
// into one allocation.
func newEntryOf(sp *space, name []byte, nameStr string, val []byte, ref *blockRef) *entry {
	n := len(name) + len(nameStr)
	buf := make([]byte, n+len(val))
	copy(buf[copy(buf, name):], nameStr)
	copy(buf[n:], val)
	e := &entry{space: sp, blk: ref, klen: uint32(n), vlen: uint32(len(val)), inline: ref == nil}
	if len(buf) > 0 {
		e.p = unsafe.Pointer(unsafe.SliceData(buf))
	}
	return e
}

// val is an inline value's bytes. Nobody writes them but tests that
// corrupt a value on purpose.
func (e *entry) val() []byte {
	if e.vlen == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Add(e.p, e.klen)), e.vlen)
}

// size is the value's length.
func (e *entry) size() int64 {
	if e.blk == nil {
		return int64(e.vlen)
	}
	return e.blk.size
}

// bkey is the key of the block holding a block value; zero for an
// inline one.
func (e *entry) bkey() block.Key {
	if e.blk == nil {
		return block.Key{}
	}
	return e.blk.key
}

// remote is the key as another node holds it, for a transient entry of
// findRemote; nil otherwise.
func (e *entry) remote() *RemoteKey {
	if e.blk == nil {
		return nil
	}
	return e.blk.remote
}

func (e *entry) name() string { return unsafe.String((*byte)(e.p), e.klen) }

func (e *entry) liveAt(nowMs int64) bool {
	at := e.expireAt.Load()
	return at == 0 || at > nowMs
}

// space is one namespace: a tenant's database.
type space struct {
	name    string
	keys    atomic.Int64
	expires atomic.Int64 // keys with a deadline
}

// shards: enough that connections on different keys rarely meet on a
// mutex (critical sections are single map operations), few enough that
// walking them all for KEYS costs nothing next to the walk itself.
const shards = 64

type keyspace struct {
	seed maphash.Seed
	// inlineBytes is what the inline values in the table cost
	// (entry.cost), the figure Options.InlineCapacity bounds.
	inlineBytes atomic.Int64
	inlineKeys  atomic.Int64
	names       [shards]struct {
		sync.RWMutex
		t table
		_ [40]byte // keep shards on separate cache lines
	}
	blocks [shards]struct {
		sync.Mutex
		m map[block.Key]*entry
		_ [48]byte
	}
	spaces struct {
		sync.RWMutex
		m map[string]*space
	}
	exp struct {
		sync.Mutex
		h expiry.Heap[*entry]
	}
}

func newKeyspace() *keyspace {
	ks := &keyspace{seed: maphash.MakeSeed()}
	for i := range ks.names {
		ks.names[i].t.seed = ks.seed
		ks.blocks[i].m = make(map[block.Key]*entry)
	}
	ks.spaces.m = make(map[string]*space)
	return ks
}

// space returns the namespace's state, creating it on first use.
func (ks *keyspace) space(ns string) *space {
	ks.spaces.RLock()
	sp := ks.spaces.m[ns]
	ks.spaces.RUnlock()
	if sp != nil {
		return sp
	}
	ks.spaces.Lock()
	defer ks.spaces.Unlock()
	if sp = ks.spaces.m[ns]; sp == nil {
		sp = &space{name: ns}
		ks.spaces.m[ns] = sp
	}
	return sp
}

func (ks *keyspace) allSpaces() []*space {
	ks.spaces.RLock()
	defer ks.spaces.RUnlock()
	out := make([]*space, 0, len(ks.spaces.m))
	for _, sp := range ks.spaces.m {
		out = append(out, sp)
	}
	return out
}

// compose appends the table key of name in sp to dst.
func compose(dst []byte, sp *space, name []byte) []byte {
	dst = append(dst, sp.name...)
	dst = append(dst, 0)
	return append(dst, name...)
}

// hash is the hash of a table key: its low bits choose the shard, the
// others the slot in the shard's table.
func (ks *keyspace) hash(key string) uint64 { return maphash.String(ks.seed, key) }

// hashEntry is the hash of e's table key, the same as hash of it
// composed: maphash hashes the bytes written, however they are split.
func hashEntry(seed maphash.Seed, e *entry) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(e.space.name)
	h.WriteByte(0)
	h.WriteString(e.name())
	return h.Sum64()
}

// splitKey is the namespace and name of a table key.
func splitKey(key string) (ns, name string) {
	ns, name, _ = strings.Cut(key, "\x00")
	return ns, name
}

// bstr is b as a string for a lookup that does not keep it.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func blockShard(k block.Key) int { return int(k[0]) % shards }

// get returns the entry of a table key, expired or not.
func (ks *keyspace) get(key []byte) *entry {
	k := bstr(key)
	h := ks.hash(k)
	ns, name := splitKey(k)
	s := &ks.names[h%shards]
	s.RLock()
	e := s.t.get(ns, name, h)
	s.RUnlock()
	return e
}

// swap replaces the entry of a key with next (nil removes it) if it is
// still old (nil: absent), and reports whether it did. old and next, the
// one that is not nil, name the key. The caller deletes old's block from
// the store.
func (ks *keyspace) swap(old, next *entry) bool {
	return ks.swapIf(old, next, -1)
}

// swapIf is swap that also requires old's deadline to be at, unless at is
// negative.
func (ks *keyspace) swapIf(old, next *entry, at int64) bool {
	k := next
	if k == nil {
		k = old
	}
	h := hashEntry(ks.seed, k)
	ns, name := k.space.name, k.name()
	s := &ks.names[h%shards]
	s.Lock()
	cur := s.t.get(ns, name, h)
	if cur != old || at >= 0 && (old == nil || old.expireAt.Load() != at) {
		s.Unlock()
		return false
	}
	if next != nil {
		s.t.set(next, h)
	} else {
		s.t.del(ns, name, h)
	}
	ks.account(old, -1)
	ks.account(next, +1)
	s.Unlock()
	if old != nil {
		ks.unlinkBlock(old)
	}
	if next != nil {
		ks.linkBlock(next)
		if at := next.expireAt.Load(); at != 0 {
			ks.pushExpiry(next, at)
		}
	}
	return true
}

// account counts e in or out of its space; called under e's name shard lock.
func (ks *keyspace) account(e *entry, d int64) {
	if e == nil {
		return
	}
	if e.inline {
		ks.inlineBytes.Add(d * e.cost())
		ks.inlineKeys.Add(d)
	}
	e.space.keys.Add(d)
	if e.expireAt.Load() != 0 {
		e.space.expires.Add(d)
	}
}

func (ks *keyspace) linkBlock(e *entry) {
	if e.inline {
		return // no block of its own: SCAN and OnDrop go by the table
	}
	b := &ks.blocks[blockShard(e.bkey())]
	b.Lock()
	b.m[e.bkey()] = e
	b.Unlock()
}

func (ks *keyspace) unlinkBlock(e *entry) {
	if e.inline {
		return
	}
	b := &ks.blocks[blockShard(e.bkey())]
	b.Lock()
	if b.m[e.bkey()] == e {
		delete(b.m, e.bkey())
	}
	b.Unlock()
}

// byBlock returns the entry whose value is block k, if that entry is
// still its key's current one.
func (ks *keyspace) byBlock(k block.Key) *entry {
	b := &ks.blocks[blockShard(k)]
	b.Lock()
	e := b.m[k]
	b.Unlock()
	if e == nil || !ks.current(e) {
		return nil
	}
	return e
}

func (ks *keyspace) current(e *entry) bool {
	h := hashEntry(ks.seed, e)
	s := &ks.names[h%shards]
	s.RLock()
	defer s.RUnlock()
	return s.t.get(e.space.name, e.name(), h) == e
}

// setExpiry sets e's deadline (0 removes it) if e is still current.
func (ks *keyspace) setExpiry(e *entry, at int64) bool {
	h := hashEntry(ks.seed, e)
	s := &ks.names[h%shards]
	s.Lock()
	if s.t.get(e.space.name, e.name(), h) != e {
		s.Unlock()
		return false
	}
	switch old := e.expireAt.Load(); {
	case old == 0 && at != 0:
		e.space.expires.Add(1)
	case old != 0 && at == 0:
		e.space.expires.Add(-1)
	}
	e.expireAt.Store(at)
	s.Unlock()
	if at != 0 {
		ks.pushExpiry(e, at)
	}
	return true
}

func (ks *keyspace) pushExpiry(e *entry, at int64) {
	ks.exp.Lock()
	ks.exp.h.Push(at, e)
	ks.exp.Unlock()
}

// due removes and returns up to max entries whose deadline has passed and
// is still theirs; stale heap entries (a deadline changed since, a key
// replaced) are dropped on the way.
func (ks *keyspace) due(nowMs int64, limit int) []*entry {
	var out []*entry
	ks.exp.Lock()
	var popped []*entry
	var ats []int64
	for len(popped) < limit {
		e, at, ok := ks.exp.h.PopDue(nowMs)
		if !ok {
			break
		}
		popped = append(popped, e)
		ats = append(ats, at)
	}
	ks.exp.Unlock()
	for i, e := range popped {
		if ks.swapIf(e, nil, ats[i]) {
			out = append(out, e)
		}
	}
	return out
}

// compactExpiry rebuilds the heap from the live deadlines when stale
// entries (from repeated EXPIREs of one key) outnumber them, so the heap
// stays proportional to the number of keys.
func (ks *keyspace) compactExpiry() {
	live := int64(0)
	for _, sp := range ks.allSpaces() {
		live += sp.expires.Load()
	}
	ks.exp.Lock()
	n := ks.exp.h.Len()
	ks.exp.Unlock()
	if int64(n) <= 2*live+1024 {
		return
	}
	var h expiry.Heap[*entry]
	for i := range ks.names {
		s := &ks.names[i]
		s.RLock()
		s.t.each(func(e *entry) bool {
			if at := e.expireAt.Load(); at != 0 {
				h.Push(at, e)
			}
			return true
		})
		s.RUnlock()
	}
	ks.exp.Lock()
	ks.exp.h = h
	ks.exp.Unlock()
}

// each calls fn for every entry of sp (every entry when sp is nil) until
// fn returns false. fn runs under a shard's read lock: it must not call
// back into the table.
func (ks *keyspace) each(sp *space, fn func(*entry) bool) {
	for i := range ks.names {
		s := &ks.names[i]
		s.RLock()
		stopped := false
		s.t.each(func(e *entry) bool {
			stopped = (sp == nil || e.space == sp) && !fn(e)
			return !stopped
		})
		s.RUnlock()
		if stopped {
			return
		}
	}
}

// eachInline calls fn, under the shard's read lock, for every inline
// entry of name shard i, and returns how many there were.
func (ks *keyspace) eachInline(i int, fn func(*entry)) int64 {
	s := &ks.names[i]
	s.RLock()
	defer s.RUnlock()
	n := int64(0)
	s.t.each(func(e *entry) bool {
		if e.inline {
			fn(e)
			n++
		}
		return true
	})
	return n
}

// LMCache stores a chunk as "<k>kv_bytes" (the payload) and "<k>metadata"
// (its shape and dtype), or "<k>:kv_bytes" and "<k>:metadata", which the
// same suffixes cover.
var (
	suffixPayload  = []byte("kv_bytes")
	suffixMetadata = []byte("metadata")
)

// partner returns the table key of the other half of an LMCache pair and
// whether name is the payload half, or nil if name is neither.
func partner(dst []byte, sp *space, name []byte) (key []byte, isPayload bool) {
	switch {
	case bytes.HasSuffix(name, suffixPayload):
		dst = compose(dst, sp, name[:len(name)-len(suffixPayload)])
		return append(dst, suffixMetadata...), true
	case bytes.HasSuffix(name, suffixMetadata):
		dst = compose(dst, sp, name[:len(name)-len(suffixMetadata)])
		return append(dst, suffixPayload...), false
	}
	return nil, false
}
