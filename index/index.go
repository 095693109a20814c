package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/yuebing/yuebing/block"
)

// Options configures an Index.
type Options struct {
	// Shards is the number of shards, a power of two. Writers to one shard
	// serialize on its mutex; readers never lock. Default: 4*GOMAXPROCS
	// rounded up to a power of two, at least 16 (as pebble's block cache:
	// enough that concurrent writers rarely meet).
	Shards int
	// InitialCapacity presizes the slot tables for this many entries. Default 0.
	InitialCapacity int
}

// EnsureDefaults fills in zero fields.
func (o *Options) EnsureDefaults() {
	if o.Shards == 0 {
		o.Shards = max(16, 1<<bits.Len(uint(4*runtime.GOMAXPROCS(0)-1)))
	}
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	var errs []error
	if o.Shards <= 0 || o.Shards&(o.Shards-1) != 0 || o.Shards > 1<<16 {
		errs = append(errs, fmt.Errorf("index: Shards %d must be a power of two in [1, 65536]", o.Shards))
	}
	if o.InitialCapacity < 0 {
		errs = append(errs, fmt.Errorf("index: InitialCapacity %d must not be negative", o.InitialCapacity))
	}
	return errors.Join(errs...)
}

// Index is a concurrent map from block key to Entry. All methods are safe for
// concurrent use; reads never block on writers for longer than one writer's
// critical section (a few hundred nanoseconds, or a table swap).
type Index struct {
	shards    []shard
	shardBits uint
	seed      [4]uint64
}

// New returns an empty index. It panics if opts are invalid; validate
// user-supplied options first.
func New(opts Options) *Index {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		panic("BUG: " + err.Error())
	}
	ix := &Index{
		shards:    make([]shard, opts.Shards),
		shardBits: uint(bits.TrailingZeros(uint(opts.Shards))),
	}
	for i := range ix.seed {
		ix.seed[i] = rand.Uint64()
	}
	perShard := opts.InitialCapacity / opts.Shards
	for i := range ix.shards {
		ix.shards[i].init(perShard)
	}
	return ix
}

// hash mixes all 32 key bytes with a per-index random seed. Honest keys are
// SHA-256 digests and already uniform, but the HTTP API accepts any 64-hex
// key, and a tenant who could choose keys that collide in one shard would turn
// every lookup into a linear scan; the secret seed keeps collisions
// unpredictable. The mixing is wyhash's: fold the 128-bit product of two
// seeded words.
func (ix *Index) hash(k *block.Key) uint64 { return seededHash(&ix.seed, k) }

// seededHash is the keyed hash behind Index and Global.
func seededHash(seed *[4]uint64, k *block.Key) uint64 {
	a := mum(binary.LittleEndian.Uint64(k[0:])^seed[0], binary.LittleEndian.Uint64(k[8:])^seed[1])
	b := mum(binary.LittleEndian.Uint64(k[16:])^seed[2], binary.LittleEndian.Uint64(k[24:])^seed[3])
	return mum(a^0xa0761d6478bd642f, b^0xe7037ed1a0b428db)
}

func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func (ix *Index) shardOf(h uint64) *shard {
	return &ix.shards[h>>(64-ix.shardBits)&(uint64(len(ix.shards))-1)]
}

// Get returns the entry of k.
func (ix *Index) Get(k block.Key) (Entry, bool) {
	h := ix.hash(&k)
	return ix.shardOf(h).get(&k, uint32(h))
}

// Contains reports whether k is in the index.
func (ix *Index) Contains(k block.Key) bool {
	_, ok := ix.Get(k)
	return ok
}

// Set inserts or replaces the entry of k. It reports whether k was new.
func (ix *Index) Set(k block.Key, e Entry) (created bool) {
	h := ix.hash(&k)
	_, existed := ix.shardOf(h).update(&k, uint32(h), func(Entry, bool) (Entry, bool) { return e, true })
	return !existed
}

// Update atomically reads and rewrites the entry of k: fn gets the current
// entry (and whether it exists) and returns the new entry and whether to keep
// it; keep=false deletes k. fn runs under the shard's lock: it must be quick
// and must not call into the index. Update returns the entry fn returned and
// whether k existed before.
func (ix *Index) Update(k block.Key, fn func(e Entry, ok bool) (Entry, bool)) (Entry, bool) {
	h := ix.hash(&k)
	return ix.shardOf(h).update(&k, uint32(h), fn)
}

// Delete removes k and reports whether it was present.
func (ix *Index) Delete(k block.Key) bool {
	_, existed := ix.Update(k, func(Entry, bool) (Entry, bool) { return Entry{}, false })
	return existed
}

// Touch records an access to k at unix second now. It takes no lock: the
// access time is advisory, and a Touch that races with a delete may be lost.
func (ix *Index) Touch(k block.Key, now uint32) {
	h := ix.hash(&k)
	ix.shardOf(h).touch(&k, uint32(h), now)
}

// Len returns the number of entries.
func (ix *Index) Len() int {
	n := 0
	for i := range ix.shards {
		n += int(ix.shards[i].count.Load())
	}
	return n
}

// MemoryBytes returns the bytes the index holds: slot tables, entry chunks
// and free lists. Its fixed overhead (shard headers) is included.
func (ix *Index) MemoryBytes() int64 {
	n := int64(len(ix.shards)) * int64(unsafe.Sizeof(shard{}))
	for i := range ix.shards {
		n += ix.shards[i].memoryBytes()
	}
	return n
}

// Match is the result of a prefix match.
type Match struct {
	// Len is how many leading keys of the chain are present.
	Len int
	// PerTier[i] counts those whose fastest copy is in tier i.
	PerTier [MaxTiers]int
}

// PrefixMatch returns how many leading keys of chain are present and, per
// tier, how many of those have their fastest copy there. A key present with
// an empty tier set ends the prefix like a missing one.
//
// Keys are matched in windows: the first pass touches every window key's slot
// and entry with independent loads, so their cache misses overlap instead of
// queueing behind each other; the second pass does the validated reads, which
// then hit the cache.
func (ix *Index) PrefixMatch(chain []block.Key) Match {
	const window = 16
	var (
		m      Match
		hashes [window]uint64
	)
	for base := 0; base < len(chain); base += window {
		keys := chain[base:min(base+window, len(chain))]
		for i := range keys {
			hashes[i] = ix.hash(&keys[i])
		}
		var warm uint64
		for i := range keys {
			warm += ix.shardOf(hashes[i]).touchSlot(uint32(hashes[i]))
		}
		for i := range keys {
			warm += ix.shardOf(hashes[i]).touchEntry(uint32(hashes[i]))
		}
		sinkWarm.Store(warm)
		for i := range keys {
			tiers, ok := ix.shardOf(hashes[i]).tiers(&keys[i], uint32(hashes[i]))
			top := tiers.Top()
			if !ok || top < 0 {
				return m
			}
			m.Len++
			m.PerTier[top]++
		}
	}
	return m
}

// sinkWarm keeps the warming loads of PrefixMatch from being optimized away.
var sinkWarm atomic.Uint64

// Scan visits entries in a stable order, resuming from cursor (0 starts a
// scan), calls fn for up to count entries and returns the cursor to continue
// from, 0 when the scan is complete. An entry present for the whole scan is
// visited exactly once; entries added or removed meanwhile may or may not be.
// fn runs without any lock held and may call into the index.
func (ix *Index) Scan(cursor uint64, count int, fn func(k block.Key, e Entry) bool) uint64 {
	if count <= 0 {
		count = 1
	}
	si, pos := int(cursor>>32), uint32(cursor)
	buf := make([]scanned, 0, min(count, 1024))
	for si < len(ix.shards) {
		buf, pos = ix.shards[si].scan(pos, count-len(buf), buf)
		for _, s := range buf {
			if !fn(s.key, s.entry) {
				return uint64(si)<<32 | uint64(s.idx+1)
			}
		}
		count -= len(buf)
		buf = buf[:0]
		if count <= 0 {
			return cursorOf(si, pos, len(ix.shards))
		}
		si, pos = si+1, 0
	}
	return 0
}

func cursorOf(si int, pos uint32, shards int) uint64 {
	if pos == 0 { // shard finished
		si++
	}
	if si >= shards {
		return 0
	}
	return uint64(si)<<32 | uint64(pos)
}

type scanned struct {
	idx   uint32
	key   block.Key
	entry Entry
}
