package index

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/yuebing/yuebing/block"
)

// Layout. A shard keeps its entries in chunks (so they never move and an
// entry index stays valid) and finds them through an open-addressing table of
// 8-byte slots. A slot is hash32<<32 | (entry index + 1); 0 is empty. The
// 32-bit hash doubles as a fingerprint, so a probe dereferences an entry only
// when 32 hash bits already match, and growing the table needs no entry reads.
const (
	chunkBits = 12
	chunkSize = 1 << chunkBits // entries per full chunk: 256 KiB
	// firstChunk is the initial size of chunk 0, which doubles up to
	// chunkSize, so an index with many shards and few entries stays small.
	firstChunk = 64
	minSlots   = 64
	// maxLoadNum/maxLoadDen is the slot load that triggers doubling. Linear
	// probing stays short at 3/4 and 8 slots share a cache line.
	maxLoadNum, maxLoadDen = 3, 4
)

// entry is one block's record: the key in four words and the packed Entry in
// four more, 64 bytes, one cache line. Every field is an atomic so readers
// can load it without the lock; the sequence lock makes the set consistent.
type entry struct {
	key [4]atomic.Uint64
	w   [3]atomic.Uint64 // packed Entry; w[2] bit 16 marks a live entry
	acc atomic.Uint64    // access time, updated without the lock
}

const liveBit = 1 << 16

type table struct {
	slots []atomic.Uint64
	mask  uint32
}

type shard struct {
	// seq is odd while a writer changes the shard. Readers retry when it is
	// odd or when it moved during their read.
	seq    atomic.Uint64
	tab    atomic.Pointer[table]
	chunks atomic.Pointer[[][]entry]
	count  atomic.Int64

	mu struct {
		sync.Mutex
		next uint32   // entries ever allocated
		free []uint32 // indexes of deleted entries, reused first
	}
	_ [64]byte // keep neighbouring shards' hot words off this cache line
}

func (s *shard) init(capacity int) {
	n := uint32(minSlots)
	for uint64(n)*maxLoadNum/maxLoadDen < uint64(capacity) {
		n *= 2
	}
	s.tab.Store(&table{slots: make([]atomic.Uint64, n), mask: n - 1})
	chunks := [][]entry{}
	s.chunks.Store(&chunks)
}

// readBegin waits out an active writer and returns the sequence to validate
// against.
func (s *shard) readBegin() uint64 {
	for spins := 0; ; spins++ {
		seq := s.seq.Load()
		if seq&1 == 0 {
			return seq
		}
		if spins > 64 {
			runtime.Gosched()
		}
	}
}

func (s *shard) writeBegin() { s.seq.Add(1) }
func (s *shard) writeEnd()   { s.seq.Add(1) }

func keyWords(k *block.Key) (a, b, c, d uint64) {
	return binary.LittleEndian.Uint64(k[0:]), binary.LittleEndian.Uint64(k[8:]),
		binary.LittleEndian.Uint64(k[16:]), binary.LittleEndian.Uint64(k[24:])
}

// entryAt returns entry idx, or nil if idx is beyond what chunks holds (a
// reader that raced with growth; it will fail validation and retry).
func entryAt(chunks [][]entry, idx uint32) *entry {
	ci, off := idx>>chunkBits, idx&(chunkSize-1)
	if int(ci) >= len(chunks) || int(off) >= len(chunks[ci]) {
		return nil
	}
	return &chunks[ci][off]
}

// find probes for k and returns its slot position and entry index. It is
// used both by readers (validated by seq afterwards) and by writers.
func (s *shard) find(tab *table, chunks [][]entry, k *block.Key, h32 uint32) (pos uint32, idx uint32, ok bool) {
	a, b, c, d := keyWords(k)
	for pos = h32 & tab.mask; ; pos = (pos + 1) & tab.mask {
		v := tab.slots[pos].Load()
		if v == 0 {
			return pos, 0, false
		}
		if uint32(v>>32) != h32 {
			continue
		}
		idx = uint32(v) - 1
		e := entryAt(chunks, idx)
		if e == nil {
			return pos, 0, false
		}
		if e.key[0].Load() == a && e.key[1].Load() == b && e.key[2].Load() == c && e.key[3].Load() == d {
			return pos, idx, true
		}
	}
}

func (s *shard) get(k *block.Key, h32 uint32) (Entry, bool) {
	for {
		seq := s.readBegin()
		tab, chunks := s.tab.Load(), *s.chunks.Load()
		_, idx, ok := s.find(tab, chunks, k, h32)
		var e Entry
		if ok {
			en := entryAt(chunks, idx)
			e = unpack(en.w[0].Load(), en.w[1].Load(), en.w[2].Load(), en.acc.Load())
		}
		if s.seq.Load() == seq {
			return e, ok
		}
	}
}

// touchSlot and touchEntry load the home slot of h32 and the entry it points
// to, without validation, only to bring them into the cache.
func (s *shard) touchSlot(h32 uint32) uint64 {
	tab := s.tab.Load()
	return tab.slots[h32&tab.mask].Load()
}

func (s *shard) touchEntry(h32 uint32) uint64 {
	tab := s.tab.Load()
	v := tab.slots[h32&tab.mask].Load()
	if v == 0 {
		return 0
	}
	if e := entryAt(*s.chunks.Load(), uint32(v)-1); e != nil {
		return e.key[0].Load()
	}
	return 0
}

// tiers is get for PrefixMatch: it reads only the tier set.
func (s *shard) tiers(k *block.Key, h32 uint32) (TierMask, bool) {
	for {
		seq := s.readBegin()
		tab, chunks := s.tab.Load(), *s.chunks.Load()
		_, idx, ok := s.find(tab, chunks, k, h32)
		var m TierMask
		if ok {
			m = TierMask(entryAt(chunks, idx).w[2].Load())
		}
		if s.seq.Load() == seq {
			return m, ok
		}
	}
}

func (s *shard) touch(k *block.Key, h32 uint32, now uint32) {
	seq := s.readBegin()
	tab, chunks := s.tab.Load(), *s.chunks.Load()
	_, idx, ok := s.find(tab, chunks, k, h32)
	if !ok || s.seq.Load() != seq {
		return
	}
	// Storing only when the second changed keeps a hot block's cache line
	// from bouncing between the cores that read it.
	if en := entryAt(chunks, idx); en != nil && uint32(en.acc.Load()) != now {
		en.acc.Store(uint64(now))
	}
}

// update applies fn to k's entry under the shard lock. It returns the entry
// fn returned and whether k existed before.
func (s *shard) update(k *block.Key, h32 uint32, fn func(Entry, bool) (Entry, bool)) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tab, chunks := s.tab.Load(), *s.chunks.Load()
	pos, idx, ok := s.find(tab, chunks, k, h32)
	var old Entry
	var en *entry
	if ok {
		en = entryAt(chunks, idx)
		old = unpack(en.w[0].Load(), en.w[1].Load(), en.w[2].Load(), en.acc.Load())
	}
	e, keep := fn(old, ok)
	switch {
	case ok && keep:
		s.writeBegin()
		storeEntry(en, e)
		s.writeEnd()
		return e, true
	case ok && !keep:
		s.writeBegin()
		s.deleteSlotLocked(tab, pos)
		en.w[2].Store(0)
		s.writeEnd()
		s.mu.free = append(s.mu.free, idx)
		s.count.Add(-1)
		return e, true
	case !ok && keep:
		if uint64(s.count.Load()+1)*maxLoadDen > uint64(len(tab.slots))*maxLoadNum {
			tab = s.growLocked(tab)
			pos, _, _ = s.find(tab, chunks, k, h32)
		}
		idx, chunks = s.allocLocked(chunks)
		en = entryAt(chunks, idx)
		a, b, c, d := keyWords(k)
		s.writeBegin()
		en.key[0].Store(a)
		en.key[1].Store(b)
		en.key[2].Store(c)
		en.key[3].Store(d)
		storeEntry(en, e)
		tab.slots[pos].Store(uint64(h32)<<32 | uint64(idx+1))
		s.writeEnd()
		s.count.Add(1)
		return e, false
	}
	return e, false
}

// memoryBytes returns the bytes held by the shard's tables, chunks and free
// list.
func (s *shard) memoryBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(len(s.tab.Load().slots))*8 + int64(cap(s.mu.free))*4
	for _, c := range *s.chunks.Load() {
		n += int64(len(c)) * int64(unsafe.Sizeof(entry{}))
	}
	return n
}

// testHookMidStore, when set by a test, runs between the words of an entry
// store so a test can hold a writer inside its critical section.
var testHookMidStore func()

func storeEntry(en *entry, e Entry) {
	w0, w1, w2 := e.pack()
	en.w[0].Store(w0)
	if testHookMidStore != nil {
		testHookMidStore()
	}
	en.w[1].Store(w1)
	en.w[2].Store(w2 | liveBit)
	en.acc.Store(uint64(e.Access))
}

// allocLocked returns a free entry index, growing the chunks if needed. New
// chunks are published before any slot refers to them.
func (s *shard) allocLocked(chunks [][]entry) (uint32, [][]entry) {
	if n := len(s.mu.free); n > 0 {
		idx := s.mu.free[n-1]
		s.mu.free = s.mu.free[:n-1]
		return idx, chunks
	}
	idx := s.mu.next
	ci, off := idx>>chunkBits, idx&(chunkSize-1)
	switch {
	case int(ci) == len(chunks):
		size := chunkSize
		if ci == 0 {
			size = firstChunk
		}
		grown := append(chunks[:len(chunks):len(chunks)], make([]entry, size))
		s.publishChunks(grown)
		chunks = grown
	case int(off) == len(chunks[ci]):
		// Chunk 0 doubles in place. Entries are copied under the write
		// sequence so readers never see a half-copied chunk.
		old := chunks[ci]
		bigger := make([]entry, 2*len(old))
		grown := append([][]entry(nil), chunks...)
		grown[ci] = bigger
		s.writeBegin()
		for i := range old {
			copyEntry(&bigger[i], &old[i])
		}
		s.publishChunks(grown)
		s.writeEnd()
		chunks = grown
	}
	s.mu.next++
	return idx, chunks
}

func (s *shard) publishChunks(c [][]entry) { s.chunks.Store(&c) }

func copyEntry(dst, src *entry) {
	for i := range src.key {
		dst.key[i].Store(src.key[i].Load())
	}
	for i := range src.w {
		dst.w[i].Store(src.w[i].Load())
	}
	dst.acc.Store(src.acc.Load())
}

// growLocked doubles the slot table. The new table is built while readers
// keep using the old one (writers are excluded by the mutex); only the swap
// is inside the write sequence.
func (s *shard) growLocked(old *table) *table {
	n := uint32(len(old.slots)) * 2
	nt := &table{slots: make([]atomic.Uint64, n), mask: n - 1}
	for i := range old.slots {
		v := old.slots[i].Load()
		if v == 0 {
			continue
		}
		pos := uint32(v>>32) & nt.mask
		for nt.slots[pos].Load() != 0 {
			pos = (pos + 1) & nt.mask
		}
		nt.slots[pos].Store(v)
	}
	s.writeBegin()
	s.tab.Store(nt)
	s.writeEnd()
	return nt
}

// deleteSlotLocked empties slot pos and shifts later slots of the same probe
// run back, so lookups never need tombstones.
func (s *shard) deleteSlotLocked(tab *table, pos uint32) {
	hole := pos
	for j := (pos + 1) & tab.mask; ; j = (j + 1) & tab.mask {
		v := tab.slots[j].Load()
		if v == 0 {
			break
		}
		home := uint32(v>>32) & tab.mask
		// Move v into the hole unless its home lies cyclically in (hole, j].
		if (j-home)&tab.mask >= (j-hole)&tab.mask {
			tab.slots[hole].Store(v)
			hole = j
		}
	}
	tab.slots[hole].Store(0)
}

// scan collects up to n live entries starting at entry index pos. It returns
// the index to resume from, or 0 when the shard is exhausted.
func (s *shard) scan(pos uint32, n int, buf []scanned) ([]scanned, uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	chunks := *s.chunks.Load()
	for ; pos < s.mu.next; pos++ {
		if len(buf) >= n {
			return buf, pos
		}
		en := entryAt(chunks, pos)
		w2 := en.w[2].Load()
		if w2&liveBit == 0 {
			continue
		}
		var k block.Key
		binary.LittleEndian.PutUint64(k[0:], en.key[0].Load())
		binary.LittleEndian.PutUint64(k[8:], en.key[1].Load())
		binary.LittleEndian.PutUint64(k[16:], en.key[2].Load())
		binary.LittleEndian.PutUint64(k[24:], en.key[3].Load())
		buf = append(buf, scanned{idx: pos, key: k, entry: unpack(en.w[0].Load(), en.w[1].Load(), w2, en.acc.Load())})
	}
	return buf, 0
}
