package adapter

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/rdma"
)

// Source is where a Save reads the KV the engine computed.
type Source interface {
	// CopyLayer copies layer layer of the plan's block blk into dst
	// (LayerBytes long): a device-to-host copy on a GPU, a memmove here.
	CopyLayer(blk, layer int, dst []byte) error
}

// Save collects the layers of one request's new blocks as the prefill
// completes them. Which blocks are new was decided once, from the request's
// Plan (dedup by key, once per request rather than per layer). Layer never
// blocks: the copy goes to staging memory, which holds a group of layers
// (Layout.GroupLayers) until its last layer comes, then to a bounded queue;
// when the staging memory or the queue is full the group is dropped and
// counted. A block is committed (its chained key written) when every one of
// its groups is stored; a block with a dropped or failed group is never
// committed, so no reader sees it. Layers come in order: a layer that does
// not follow the previous one of its group drops the group.
//
// A Save is used by one goroutine (the engine's prefill of the request).
type Save struct {
	c      *Connector
	keys   []block.Key
	blocks []int // plan indices of the blocks to store
	done   []atomic.Int32
	broken []atomic.Bool
	stored []chan struct{} // per layer, closed when its group's put returned or it was dropped
	once   []sync.Once

	// The group being staged: its chunks (one per block), and the next
	// layer it expects.
	cur      [][]byte
	curGroup int
	curNext  int
}

// Save starts saving the full blocks of plan that the store does not hold.
func (c *Connector) Save(plan Plan) *Save {
	s := &Save{c: c, keys: plan.Keys, curGroup: -1}
	for i := range plan.Keys {
		if i < plan.HitBlocks || (i < len(plan.Stored) && plan.Stored[i]) {
			c.st.deduped.Add(1)
			continue
		}
		s.blocks = append(s.blocks, i)
	}
	s.done = make([]atomic.Int32, len(s.blocks))
	s.broken = make([]atomic.Bool, len(s.blocks))
	s.stored = make([]chan struct{}, c.layout.Layers)
	s.once = make([]sync.Once, c.layout.Layers)
	for i := range s.stored {
		s.stored[i] = make(chan struct{})
	}
	return s
}

// Stored returns a channel closed once the put of layer l's group has
// returned, or the group was dropped (see Broken): the signal a decode instance waits for
// before reading the layer (Connector.LoadStream).
func (s *Save) Stored(l int) <-chan struct{} { return s.stored[l] }

// Broken reports whether a layer of the save was dropped or failed, so some
// block will not be committed.
func (s *Save) Broken() bool {
	for i := range s.broken {
		if s.broken[i].Load() {
			return true
		}
	}
	return false
}

func (s *Save) markStored(l int) {
	s.once[l].Do(func() { close(s.stored[l]) })
}

func (s *Save) markGroupStored(g int) {
	first, end := s.c.layout.GroupRange(g)
	for l := first; l < end; l++ {
		s.markStored(l)
	}
}

// Blocks returns the plan indices of the blocks this save stores.
func (s *Save) Blocks() []int { return s.blocks }

// layerJob is one group of layers of a save's blocks, staged.
type layerJob struct {
	s      *Save
	group  int
	chunks [][]byte
}

// Layer copies layer l of the save's blocks from src into the staged group,
// and queues the group when l is its last layer. It reports false when the
// layer was dropped, and with it its group (staging or queue full,
// connector closed, copy failed, a layer out of order); the engine goes on
// either way.
func (s *Save) Layer(l int, src Source) (queued bool) {
	return s.layer(context.Background(), false, l, src)
}

// LayerWait is Layer for a caller that may wait: it waits, honouring ctx,
// for staging memory and queue room instead of dropping. An engine's
// eviction path uses it, where the block would otherwise be lost; the
// prefill path uses Layer.
func (s *Save) LayerWait(ctx context.Context, l int, src Source) bool {
	return s.layer(ctx, true, l, src)
}

func (s *Save) layer(ctx context.Context, wait bool, l int, src Source) (queued bool) {
	c := s.c
	if l < 0 || l >= c.layout.Layers {
		s.drop()
		return false
	}
	g := c.layout.GroupOf(l)
	first, end := c.layout.GroupRange(g)
	if len(s.blocks) == 0 {
		s.markStored(l)
		return true
	}
	defer func() {
		if !queued {
			s.markGroupStored(g)
		}
	}()
	if c.closed.Load() {
		s.dropGroup()
		s.drop()
		return false
	}
	if l == first {
		s.dropGroup() // a group left unfinished by layers that never came
		chunks := c.stage.take(len(s.blocks))
		for chunks == nil && wait && len(s.blocks) <= c.stage.max {
			select {
			case <-c.stage.freed:
			case <-ctx.Done():
			case <-c.ctx.Done():
			}
			if ctx.Err() != nil || c.ctx.Err() != nil {
				break
			}
			chunks = c.stage.take(len(s.blocks))
		}
		if chunks == nil {
			s.drop()
			return false
		}
		size := c.layout.GroupBytes(g)
		for j := range chunks {
			chunks[j] = chunks[j][:size]
		}
		s.cur, s.curGroup, s.curNext = chunks, g, l
	}
	if s.cur == nil || s.curGroup != g || s.curNext != l {
		// The group's first layers were dropped, or this layer is out of
		// order: the group cannot be completed.
		s.dropGroup()
		s.drop()
		return false
	}
	lb := c.layout.LayerBytes()
	off := int64(l-first) * lb
	for j, i := range s.blocks {
		if err := src.CopyLayer(i, l, s.cur[j][off:off+lb]); err != nil {
			c.opts.Logger.Warn("adapter: copying a layer to save failed", "layer", l, "err", err)
			s.dropGroup()
			s.drop()
			return false
		}
	}
	s.curNext = l + 1
	if l < end-1 {
		return true
	}
	job := &layerJob{s: s, group: g, chunks: s.cur}
	s.cur, s.curGroup = nil, -1
	if !c.enqueue(ctx, wait, job) {
		c.stage.give(job.chunks)
		s.drop()
		return false
	}
	return true
}

// dropGroup gives the staged group's chunks back, if one is staged; its
// blocks are marked broken.
func (s *Save) dropGroup() {
	if s.cur == nil {
		return
	}
	s.c.stage.give(s.cur)
	g := s.curGroup
	s.cur, s.curGroup = nil, -1
	for i := range s.broken {
		s.broken[i].Store(true)
	}
	s.markGroupStored(g)
}

// enqueue hands a job to the workers: at once, or with wait until there is
// room or ctx ends. False when the queue is full or
// closed.
func (c *Connector) enqueue(ctx context.Context, wait bool, j *layerJob) bool {
	// The read lock keeps Close from closing the queue under the send;
	// Close cancels c.ctx first, so a waiting send gives up.
	c.queueMu.RLock()
	defer c.queueMu.RUnlock()
	if c.closed.Load() {
		return false
	}
	if !wait {
		select {
		case c.saves <- j:
			c.pending.Add(1)
			return true
		default:
			return false
		}
	}
	select {
	case c.saves <- j:
		c.pending.Add(1)
		return true
	case <-ctx.Done():
	case <-c.ctx.Done():
	}
	return false
}

func (s *Save) drop() {
	s.c.st.dropped.Add(1)
	for i := range s.broken {
		s.broken[i].Store(true)
	}
}

func (c *Connector) saveWorker() {
	var batch []*layerJob
	for j := range c.saves {
		// Coalesce what else is queued into the same multi-put, up to
		// about LoadRequestBytes: when saves back up, fewer and larger
		// requests drain them with less work per byte.
		batch = append(batch[:0], j)
		frames, bytes := len(j.chunks), int64(len(j.chunks))*c.layout.GroupBytes(j.group)
	more:
		for bytes < c.opts.LoadRequestBytes {
			select {
			case j, ok := <-c.saves:
				if !ok {
					break more
				}
				batch = append(batch, j)
				frames += len(j.chunks)
				bytes += int64(len(j.chunks)) * c.layout.GroupBytes(j.group)
				if frames >= maxFrames/2 {
					break more
				}
			default:
				break more
			}
		}
		if c.ctx.Err() != nil {
			for _, j := range batch {
				c.stage.give(j.chunks)
				c.st.dropped.Add(1)
				j.s.markGroupStored(j.group)
			}
		} else {
			c.runSaves(batch)
		}
		c.pending.Add(-int64(len(batch)))
		clear(batch)
	}
}

// runSaves stores the groups of jobs in one multi-put and commits, in a
// second, the blocks whose last group this was.
func (c *Connector) runSaves(jobs []*layerJob) {
	var items []client.Item
	fp := c.layout.fingerprint()
	for _, j := range jobs {
		for n, i := range j.s.blocks {
			it := client.Item{Key: c.layout.groupKey(fp, j.s.keys[i], j.group), Data: j.chunks[n]}
			// A batch mixes groups of several saves, so each frame names
			// its parent: the same group of the block before it in its
			// request's chain, stored by this save or an earlier one.
			// The node's SSD admission tells a chain's interior from its
			// tail by them.
			if i > 0 {
				it.Parent, it.HasParent = c.layout.groupKey(fp, j.s.keys[i-1], j.group), true
			}
			items = append(items, it)
		}
	}
	res, err := c.putBatch(c.ctx, items)
	var commit []client.Item
	at := 0
	for _, j := range jobs {
		s := j.s
		c.stage.give(j.chunks)
		for n := range s.blocks {
			k := at + n
			ok := err == nil || (k < len(res) && res[k].Err == nil && res[k].Status != "error" && res[k].Status != "")
			if !ok {
				s.broken[n].Store(true)
				continue
			}
			first, end := c.layout.GroupRange(j.group)
			c.st.savedLayers.Add(int64(end - first))
			c.st.savedBytes.Add(c.layout.GroupBytes(j.group))
			if int(s.done[n].Add(1)) == c.layout.Groups() && !s.broken[n].Load() {
				it := client.Item{Key: s.keys[s.blocks[n]], Data: c.commit}
				if i := s.blocks[n]; i > 0 {
					it.Parent, it.HasParent = s.keys[i-1], true
				}
				commit = append(commit, it)
			}
		}
		at += len(s.blocks)
		s.markGroupStored(j.group)
	}
	if err != nil {
		c.st.saveErrors.Add(1)
		c.opts.Logger.Warn("adapter: saving layers failed", "layers", len(jobs), "err", err)
	}
	if len(commit) == 0 {
		return
	}
	res, err = c.putBatch(c.ctx, commit)
	for n := range commit {
		if err == nil || (n < len(res) && res[n].Err == nil && res[n].Status != "") {
			c.st.committed.Add(1)
		}
	}
	if err != nil {
		c.st.saveErrors.Add(1)
		c.opts.Logger.Warn("adapter: committing blocks failed", "blocks", len(commit), "err", err)
	}
}

// staging is the bounded host memory saves copy layers into: a free list of
// chunks of one group of one block, allocated on first use up to the budget and reused
// after, so steady-state saves allocate nothing. With shared memory on, the
// chunks are cut from one memfd region (allocated lazily by the kernel, page
// by page), which the node maps: a save batch is then stored straight out of
// it (Staging.PutFrom), with no copy into a session's segment.
type staging struct {
	size int64
	max  int
	// region backs the chunks when it could be had; nil otherwise.
	region *rdma.SharedMemory
	// freed is signalled when chunks come back, for LayerWait.
	freed chan struct{}
	mu    struct {
		sync.Mutex
		free   [][]byte
		alloc  int
		closed bool
	}
}

func newStaging(size, budget int64, shared bool) *staging {
	s := &staging{size: size, max: int(budget / size), freed: make(chan struct{}, 1)}
	if shared && s.max > 0 {
		if sm, err := rdma.NewSharedMemory("yuebing-save-staging", s.max*int(size)); err == nil {
			s.region = sm
		}
	}
	return s
}

// take returns n chunks, or nil when the budget cannot cover them.
func (s *staging) take(n int) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || len(s.mu.free)+(s.max-s.mu.alloc) < n {
		return nil
	}
	out := make([][]byte, 0, n)
	for len(out) < n && len(s.mu.free) > 0 {
		k := len(s.mu.free) - 1
		out = append(out, s.mu.free[k])
		s.mu.free = s.mu.free[:k]
	}
	for len(out) < n {
		if s.region != nil {
			lo, hi := int64(s.mu.alloc)*s.size, int64(s.mu.alloc+1)*s.size
			out = append(out, s.region.Bytes()[lo:hi:hi])
		} else {
			out = append(out, make([]byte, s.size))
		}
		s.mu.alloc++
	}
	return out
}

func (s *staging) give(chunks [][]byte) {
	s.mu.Lock()
	s.mu.free = append(s.mu.free, chunks...)
	s.mu.Unlock()
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// regionItem is it's range of the region (its data is a prefix of a
// chunk), with its parent, or ok false when the data is not in it (a
// commit record, no region).
func (s *staging) regionItem(it client.Item) (client.RegionItem, bool) {
	data := it.Data
	if s.region == nil || len(data) == 0 {
		return client.RegionItem{}, false
	}
	base := s.region.Bytes()
	// Both are in one mapping outside the Go heap, which never moves.
	off := int64(uintptr(unsafe.Pointer(unsafe.SliceData(data))) - uintptr(unsafe.Pointer(unsafe.SliceData(base))))
	if off < 0 || off+int64(len(data)) > int64(len(base)) {
		return client.RegionItem{}, false
	}
	return client.RegionItem{Key: it.Key, Region: s.region, Offset: off, Length: int64(len(data)), Parent: it.Parent, HasParent: it.HasParent}, true
}

// close unmaps the region once every chunk is back; chunks still out (a
// save the engine abandoned mid-layer) leave it to the garbage collector,
// since an engine goroutine may still be copying into one.
func (s *staging) close() {
	if s.region == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.closed = true
	if len(s.mu.free) == s.mu.alloc {
		s.region.Close()
		s.mu.free = nil
		return
	}
	runtime.AddCleanup(s, func(sm *rdma.SharedMemory) { sm.Close() }, s.region)
}

// Flush waits until the save queue is empty, for tests and orderly
// shutdowns; it does not stop new saves.
func (c *Connector) Flush(ctx context.Context) error {
	// Saves end in network calls of their own; polling their count every
	// millisecond costs nothing next to them.
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for c.pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("adapter: flush: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}
