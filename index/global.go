package index

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"unsafe"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yuebing/yuebing/block"
)

// GlobalOptions configures a Global.
type GlobalOptions struct {
	// MaxNodes bounds node ids: every id must be below it. Node ids index
	// slices, so a bound keeps a corrupt id from allocating gigabytes.
	// Default 4096; at most 1<<20.
	MaxNodes int
	// InitialBlocks presizes the key table for this many distinct blocks.
	// Default 0.
	InitialBlocks int
	// BatchSize is how many keys ReplaceNode and RemoveNode handle per
	// hold of the write lock, so a node's million-block full state never
	// stalls Query for more than one batch (about 0.5 ms at the default).
	// Default 4096.
	BatchSize int
}

// EnsureDefaults fills in zero fields.
func (o *GlobalOptions) EnsureDefaults() {
	if o.MaxNodes == 0 {
		o.MaxNodes = 4096
	}
	if o.BatchSize == 0 {
		o.BatchSize = 4096
	}
}

// Validate reports every invalid field.
func (o *GlobalOptions) Validate() error {
	var errs []error
	if o.MaxNodes < 1 || o.MaxNodes > 1<<20 {
		errs = append(errs, fmt.Errorf("index: MaxNodes %d must be in [1, 1<<20]", o.MaxNodes))
	}
	if o.InitialBlocks < 0 || o.InitialBlocks > 1<<31 {
		errs = append(errs, fmt.Errorf("index: InitialBlocks %d must be in [0, 1<<31]", o.InitialBlocks))
	}
	if o.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("index: BatchSize %d must be positive", o.BatchSize))
	}
	return errors.Join(errs...)
}

// Change is one event of a node's stream: the block Key was added to or
// removed from the node's tier Tier.
type Change struct {
	Key   block.Key
	Tier  uint8
	Added bool
}

// Held is one line of a node's full state: the node holds Key in tier Tier.
// A block held in two tiers is listed twice.
type Held struct {
	Key  block.Key
	Tier uint8
}

// Holder is one node holding a block and the tiers it holds it in.
type Holder struct {
	Node  uint32
	Tiers TierMask
}

// NodeMatch is one node's share of a chain: it holds the chain's first
// PrefixLen keys, PerTier[i] of them with their fastest copy in tier i.
type NodeMatch struct {
	Node      uint32
	PrefixLen int
	PerTier   [MaxTiers]int
}

// nodeStripes is the number of writer locks. A node's calls serialize on
// stripe node%nodeStripes; 64 keeps the nodes of any cluster up to 64 nodes
// on stripes of their own, and a shared stripe only delays a ReplaceNode
// behind another node's, never changes a result.
const nodeStripes = 64

// Global is the cluster's block directory, held by the elected leader: for
// every block, which nodes hold it and in which tiers. Nodes feed it their
// add/remove events (Apply) and, on every (re)connect, their full state
// (ReplaceNode), so a new leader rebuilds it from the nodes alone.
//
// Layout: every key is interned to a dense uint32 id (a seeded open-addressing
// table over a key array), and each node keeps one roaring bitmap of ids per
// tier. docs/cluster.md compares this with one bitmap of node ids per key: it
// needs about 2 bytes per (block, node) pair plus 45 per distinct block,
// against over 150 per pair, and removing a node drops its bitmaps instead of
// visiting every key.
//
// All methods are safe for concurrent use. Readers share a read lock; Apply
// holds the write lock for its batch; ReplaceNode and RemoveNode take it in
// batches of GlobalOptions.BatchSize keys and still appear atomic: readers see
// a node's old blocks until its new set is published whole. Calls for one node
// are serialized (its stream is ordered); calls for different nodes may run
// concurrently.
type Global struct {
	opts    GlobalOptions
	seed    [4]uint64
	writers [nodeStripes]sync.Mutex

	mu struct {
		sync.RWMutex
		// slots is the key table: hash32<<32 | (id+1), 0 empty. The 32-bit
		// hash places the slot and doubles as a fingerprint, so probes
		// read a key only on a 32-bit match and growth reads no keys.
		slots []uint64
		// keys holds the key of each id in chunks of keyChunk, so
		// growth never copies gigabytes of keys (nor stalls the
		// garbage collector behind one long copy).
		keys [][]block.Key
		next uint32 // ids ever allocated
		// refs counts, per id, the nodes holding it plus the reservations
		// of ReplaceNode calls in flight; an id is freed when it drops to 0.
		refs  []uint32
		free  []uint32 // freed ids, reused first
		count int      // interned keys
		nodes []*nodeSet
		known int // nodes with a set
	}
}

// nodeSet is what one node holds. It is never modified once published by
// ReplaceNode, except under the write lock by Apply.
type nodeSet struct {
	tiers  [MaxTiers]*roaring.Bitmap // ids per tier; nil when empty
	blocks int                       // distinct ids in any tier
}

// mask returns the tiers of the node holding id.
func (s *nodeSet) mask(id uint32) TierMask {
	var m TierMask
	for t, bm := range &s.tiers {
		if bm != nil && bm.Contains(id) {
			m |= 1 << uint(t)
		}
	}
	return m
}

// top returns the fastest tier of the node holding id, or -1.
func (s *nodeSet) top(id uint32) int {
	for t, bm := range &s.tiers {
		if bm != nil && bm.Contains(id) {
			return t
		}
	}
	return -1
}

// union returns every id of the set, in one bitmap the caller owns.
func (s *nodeSet) union() *roaring.Bitmap {
	var bms []*roaring.Bitmap
	for _, bm := range &s.tiers {
		if bm != nil {
			bms = append(bms, bm)
		}
	}
	return roaring.FastOr(bms...)
}

// NewGlobal returns an empty global index. It panics if opts are invalid;
// validate user-supplied options first.
func NewGlobal(opts GlobalOptions) *Global {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		panic("BUG: " + err.Error())
	}
	g := &Global{opts: opts}
	for i := range g.seed {
		g.seed[i] = rand.Uint64()
	}
	n := minSlots
	for n*maxLoadNum/maxLoadDen < opts.InitialBlocks {
		n *= 2
	}
	g.mu.slots = make([]uint64, n)
	g.mu.refs = make([]uint32, 0, opts.InitialBlocks)
	return g
}

func (g *Global) checkNode(node uint32) error {
	if uint64(node) >= uint64(g.opts.MaxNodes) {
		return fmt.Errorf("%w: node %d, MaxNodes %d", ErrNodeRange, node, g.opts.MaxNodes)
	}
	return nil
}

func checkTier(t uint8) error {
	if t >= MaxTiers {
		return fmt.Errorf("%w: tier %d, MaxTiers %d", ErrTierRange, t, MaxTiers)
	}
	return nil
}

// Apply applies a batch of one node's add/remove events, atomically and in
// order. Events are idempotent: adding a block the node already holds in that
// tier, or removing one it does not, changes nothing. A node first heard of
// here becomes known, as if it had reported an empty full state. Apply fails
// (changing nothing) if the node id or any tier is out of range.
func (g *Global) Apply(node uint32, changes []Change) error {
	if err := g.checkNode(node); err != nil {
		return err
	}
	for _, c := range changes {
		if err := checkTier(c.Tier); err != nil {
			return err
		}
	}
	w := &g.writers[node%nodeStripes]
	w.Lock()
	defer w.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.nodeLocked(node)
	for i := range changes {
		c := &changes[i]
		if c.Added {
			id, _ := g.internLocked(&c.Key)
			bm := s.tiers[c.Tier]
			if bm == nil {
				bm = roaring.New()
				s.tiers[c.Tier] = bm
			}
			held := s.mask(id) != 0
			if bm.CheckedAdd(id) && !held {
				g.mu.refs[id]++
				s.blocks++
			}
			continue
		}
		id, ok := g.lookupLocked(&c.Key)
		bm := s.tiers[c.Tier]
		if !ok || bm == nil || !bm.CheckedRemove(id) {
			continue
		}
		if bm.IsEmpty() {
			s.tiers[c.Tier] = nil
		}
		if s.mask(id) == 0 {
			s.blocks--
			g.releaseLocked(id)
		}
	}
	return nil
}

// nodeLocked returns the set of node, creating an empty one.
func (g *Global) nodeLocked(node uint32) *nodeSet {
	if int(node) >= len(g.mu.nodes) {
		g.mu.nodes = slices.Grow(g.mu.nodes, int(node)+1-len(g.mu.nodes))[:node+1]
	}
	s := g.mu.nodes[node]
	if s == nil {
		s = &nodeSet{}
		g.mu.nodes[node] = s
		g.mu.known++
	}
	return s
}

// ReplaceNode makes full the whole of what node holds, as one atomic change
// to readers: the node's full state on (re)connect. Duplicate lines are
// harmless. It fails (changing nothing) if the node id or a tier is out of
// range.
//
// It works in three steps so readers never wait for more than one batch:
// intern the keys in batches, reserving each id so it cannot be freed and
// reused meanwhile; build the node's bitmaps without any lock; publish them
// in one short critical section; then release the old set in batches.
func (g *Global) ReplaceNode(node uint32, full []Held) error {
	if err := g.checkNode(node); err != nil {
		return err
	}
	for _, h := range full {
		if err := checkTier(h.Tier); err != nil {
			return err
		}
	}
	w := &g.writers[node%nodeStripes]
	w.Lock()
	defer w.Unlock()

	// id<<8 | tier, so one sort orders by id and groups a block's tiers.
	packed := make([]uint64, len(full))
	for lo := 0; lo < len(full); lo += g.opts.BatchSize {
		hi := min(lo+g.opts.BatchSize, len(full))
		g.mu.Lock()
		for i := lo; i < hi; i++ {
			id, _ := g.internLocked(&full[i].Key)
			g.mu.refs[id]++ // the reservation
			packed[i] = uint64(id)<<8 | uint64(full[i].Tier)
		}
		g.mu.Unlock()
	}

	slices.Sort(packed)
	var (
		perTier [MaxTiers][]uint32
		extra   []uint32 // ids reserved more than once
		s       = &nodeSet{}
	)
	for i, p := range packed {
		id, t := uint32(p>>8), uint8(p)
		if i > 0 && uint32(packed[i-1]>>8) == id {
			extra = append(extra, id)
			if packed[i-1] == p {
				continue // the same line twice
			}
		} else {
			s.blocks++
		}
		perTier[t] = append(perTier[t], id)
	}
	for t, ids := range perTier {
		if len(ids) > 0 {
			s.tiers[t] = roaring.BitmapOf(ids...)
		}
	}

	g.mu.Lock()
	old := g.setNodeLocked(node, s)
	for _, id := range extra {
		g.mu.refs[id]-- // never to 0: one reservation remains as the hold
	}
	g.mu.Unlock()
	g.releaseSet(old)
	return nil
}

// setNodeLocked installs s (nil: forget the node) and returns the old set.
func (g *Global) setNodeLocked(node uint32, s *nodeSet) *nodeSet {
	var old *nodeSet
	if int(node) < len(g.mu.nodes) {
		old = g.mu.nodes[node]
	}
	if s != nil {
		g.nodeLocked(node)
		g.mu.nodes[node] = s
	} else if old != nil {
		g.mu.nodes[node] = nil
		g.mu.known--
	}
	return old
}

// releaseSet drops the holds of a set no longer published, in batches.
func (g *Global) releaseSet(s *nodeSet) {
	if s == nil || s.blocks == 0 {
		return
	}
	it := s.union().ManyIterator()
	buf := make([]uint32, min(g.opts.BatchSize, s.blocks))
	for {
		n := it.NextMany(buf)
		if n == 0 {
			return
		}
		g.mu.Lock()
		for _, id := range buf[:n] {
			g.releaseLocked(id)
		}
		g.mu.Unlock()
	}
}

// RemoveNode forgets node and everything it held: the node is gone (its
// lease lapsed). It reports whether the node was known.
func (g *Global) RemoveNode(node uint32) bool {
	if g.checkNode(node) != nil {
		return false
	}
	w := &g.writers[node%nodeStripes]
	w.Lock()
	defer w.Unlock()
	g.mu.Lock()
	old := g.setNodeLocked(node, nil)
	g.mu.Unlock()
	g.releaseSet(old)
	return old != nil
}

// Holders returns the nodes holding k, by node id, with their tiers.
func (g *Global) Holders(k block.Key) []Holder { return g.AppendHolders(nil, k) }

// AppendHolders appends the nodes holding k, by node id, to dst.
func (g *Global) AppendHolders(dst []Holder, k block.Key) []Holder {
	g.mu.RLock()
	defer g.mu.RUnlock()
	id, ok := g.lookupLocked(&k)
	if !ok {
		return dst
	}
	for n, s := range g.mu.nodes {
		if s == nil {
			continue
		}
		if m := s.mask(id); m != 0 {
			dst = append(dst, Holder{Node: uint32(n), Tiers: m})
		}
	}
	return dst
}

// NodeTiers returns the tiers in which node holds k; empty if it does not.
func (g *Global) NodeTiers(node uint32, k block.Key) TierMask {
	g.mu.RLock()
	defer g.mu.RUnlock()
	id, ok := g.lookupLocked(&k)
	if !ok || int(node) >= len(g.mu.nodes) || g.mu.nodes[node] == nil {
		return 0
	}
	return g.mu.nodes[node].mask(id)
}

// ReplicaCount returns how many nodes hold k.
func (g *Global) ReplicaCount(k block.Key) int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	id, ok := g.lookupLocked(&k)
	if !ok {
		return 0
	}
	n := 0
	for _, s := range g.mu.nodes {
		if s != nil && s.mask(id) != 0 {
			n++
		}
	}
	return n
}

// Query returns, for every node holding at least the chain's first key, the
// length of the longest prefix of chain it holds and, per tier, how many of
// those keys have their fastest copy there: the cluster-wide form of
// Index.PrefixMatch, shaped like Mooncake Conductor's query. Results are
// ordered by PrefixLen, longest first, then by node id; the slice is the
// caller's.
//
// Keys are resolved to ids once; the chain ends for every node at the first
// key no node holds. Each node then walks the ids until its first miss, so the
// cost is the sum of the nodes' prefix lengths, not nodes x chain length.
func (g *Global) Query(chain []block.Key) []NodeMatch {
	var stack [512]uint32
	ids := stack[:0]
	var out []NodeMatch
	g.mu.RLock()
	defer g.mu.RUnlock()
	for i := range chain {
		id, ok := g.lookupLocked(&chain[i])
		if !ok {
			break
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil
	}
	for n, s := range g.mu.nodes {
		if s == nil || s.blocks == 0 {
			continue
		}
		m := NodeMatch{Node: uint32(n)}
		for _, id := range ids {
			t := s.top(id)
			if t < 0 {
				break
			}
			m.PrefixLen++
			m.PerTier[t]++
		}
		if m.PrefixLen > 0 {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b NodeMatch) int {
		if c := cmp.Compare(b.PrefixLen, a.PrefixLen); c != 0 {
			return c
		}
		return cmp.Compare(a.Node, b.Node)
	})
	return out
}

// Len returns the number of distinct blocks held by some node. While a
// ReplaceNode is in flight it also counts the keys that call has reserved
// but not yet published.
func (g *Global) Len() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.mu.count
}

// Nodes returns the known nodes' ids in increasing order: those that sent a
// full state or an event and were not removed since.
func (g *Global) Nodes() []uint32 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]uint32, 0, g.mu.known)
	for n, s := range g.mu.nodes {
		if s != nil {
			out = append(out, uint32(n))
		}
	}
	return out
}

// NodeLen returns how many distinct blocks node holds.
func (g *Global) NodeLen(node uint32) int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if int(node) >= len(g.mu.nodes) || g.mu.nodes[node] == nil {
		return 0
	}
	return g.mu.nodes[node].blocks
}

// MemoryBytes returns the bytes the index holds: the key table, key array,
// reference counts, free list and every node's bitmaps (as roaring estimates
// them).
func (g *Global) MemoryBytes() int64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n := int64(len(g.mu.slots))*8 + int64(len(g.mu.keys))*keyChunk*block.KeySize +
		int64(cap(g.mu.refs))*4 + int64(cap(g.mu.free))*4 +
		int64(cap(g.mu.nodes))*int64(unsafe.Sizeof((*nodeSet)(nil)))
	for _, s := range g.mu.nodes {
		if s == nil {
			continue
		}
		n += int64(unsafe.Sizeof(nodeSet{}))
		for _, bm := range &s.tiers {
			if bm != nil {
				n += int64(bm.GetSizeInBytes())
			}
		}
	}
	return n
}

// The key table.

// keyChunk is the number of keys per chunk: 2 MiB of keys, small against
// millions of blocks, large enough that the chunk list stays short.
const keyChunk = 1 << 16

func (g *Global) keyLocked(id uint32) *block.Key { return &g.mu.keys[id/keyChunk][id%keyChunk] }

func (g *Global) hash32(k *block.Key) uint32 { return uint32(seededHash(&g.seed, k)) }

// lookupLocked returns the id of k.
func (g *Global) lookupLocked(k *block.Key) (uint32, bool) {
	h := g.hash32(k)
	slots := g.mu.slots
	mask := uint32(len(slots) - 1)
	for pos := h & mask; ; pos = (pos + 1) & mask {
		v := slots[pos]
		if v == 0 {
			return 0, false
		}
		if uint32(v>>32) == h && *g.keyLocked(uint32(v) - 1) == *k {
			return uint32(v) - 1, true
		}
	}
}

// internLocked returns the id of k, allocating one (with refs 0) if k is
// new.
func (g *Global) internLocked(k *block.Key) (id uint32, created bool) {
	h := g.hash32(k)
	mask := uint32(len(g.mu.slots) - 1)
	pos := h & mask
	for ; ; pos = (pos + 1) & mask {
		v := g.mu.slots[pos]
		if v == 0 {
			break
		}
		if uint32(v>>32) == h && *g.keyLocked(uint32(v) - 1) == *k {
			return uint32(v) - 1, false
		}
	}
	if (g.mu.count+1)*maxLoadDen > len(g.mu.slots)*maxLoadNum {
		g.growLocked()
		mask = uint32(len(g.mu.slots) - 1)
		for pos = h & mask; g.mu.slots[pos] != 0; pos = (pos + 1) & mask {
		}
	}
	if n := len(g.mu.free); n > 0 {
		id = g.mu.free[n-1]
		g.mu.free = g.mu.free[:n-1]
		*g.keyLocked(id) = *k
	} else {
		if g.mu.next == 1<<32-1 {
			panic("BUG: index: more than 2^32-1 distinct blocks")
		}
		id = g.mu.next
		g.mu.next++
		if int(id/keyChunk) == len(g.mu.keys) {
			g.mu.keys = append(g.mu.keys, make([]block.Key, keyChunk))
		}
		*g.keyLocked(id) = *k
		g.mu.refs = append(g.mu.refs, 0)
	}
	g.mu.slots[pos] = uint64(h)<<32 | uint64(id+1)
	g.mu.count++
	return id, true
}

// releaseLocked drops one hold on id and frees it at zero.
func (g *Global) releaseLocked(id uint32) {
	if g.mu.refs[id] == 0 {
		panic("BUG: index: releasing a free id")
	}
	g.mu.refs[id]--
	if g.mu.refs[id] > 0 {
		return
	}
	k := g.keyLocked(id)
	h := g.hash32(k)
	slots := g.mu.slots
	mask := uint32(len(slots) - 1)
	pos := h & mask
	for slots[pos] != uint64(h)<<32|uint64(id+1) {
		pos = (pos + 1) & mask
	}
	// Backward-shift deletion: move later members of the probe run into
	// the hole unless their home lies cyclically in (hole, j].
	hole := pos
	for j := (pos + 1) & mask; slots[j] != 0; j = (j + 1) & mask {
		home := uint32(slots[j]>>32) & mask
		if (j-home)&mask >= (j-hole)&mask {
			slots[hole] = slots[j]
			hole = j
		}
	}
	slots[hole] = 0
	*k = block.Key{}
	g.mu.free = append(g.mu.free, id)
	g.mu.count--
}

func (g *Global) growLocked() {
	old := g.mu.slots
	slots := make([]uint64, 2*len(old))
	mask := uint32(len(slots) - 1)
	for _, v := range old {
		if v == 0 {
			continue
		}
		pos := uint32(v>>32) & mask
		for slots[pos] != 0 {
			pos = (pos + 1) & mask
		}
		slots[pos] = v
	}
	g.mu.slots = slots
}
