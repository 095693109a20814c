package cluster

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/tier"
)

var _ tier.RemoteReader = (*Node)(nil)

// ReadRemote implements tier.RemoteReader: ReadMany of one key.
func (n *Node) ReadRemote(ctx context.Context, key block.Key) (*tier.Handle, tier.Origin, error) {
	got, errs := n.ReadMany(ctx, []block.Key{key})
	if got[0] == nil {
		return nil, tier.Origin{}, errs[0]
	}
	return got[0].Handle, got[0].Origin, nil
}

// Remote is a block read from another node by ReadMany: the caller owns
// Handle and must release it.
type Remote struct {
	Handle *tier.Handle
	Origin tier.Origin
}

// ReadMany reads blocks held on other nodes, in as few round trips as the
// common case allows: none to find a block whose holder this node
// remembers, else one to the leader for all of them; then one per holder
// for all its blocks, each verified against its checksum. A holder that
// does not answer, or no longer has a block, is passed over for the next
// (fastest tier first). got[i] is nil when keys[i] was not read; errs[i]
// then wraps tier.ErrNotFound, whether no node holds it or only nodes that
// did not answer may: a cache's miss, whatever peers are down, which the
// caller recomputes rather than waits for. Errors name nodes, never their
// addresses. Blocks read are admitted to the
// local store as Options.Admit says.
func (n *Node) ReadMany(ctx context.Context, keys []block.Key) (got []*Remote, errs []error) {
	got = make([]*Remote, len(keys))
	errs = make([]error, len(keys))
	if n.closed.Load() || !n.started.Load() {
		for i := range errs {
			errs[i] = tier.ErrNotFound
		}
		return got, errs
	}
	start := time.Now()
	cands := make([][]index.Holder, len(keys))
	// Remembered locations first: one round trip when they still hold.
	var cached []int
	for i, k := range keys {
		if ids, ok := n.locs.Get(k); ok {
			for _, id := range ids {
				cands[i] = append(cands[i], index.Holder{Node: id})
			}
			cached = append(cached, i)
		}
	}
	if len(cached) > 0 {
		n.stats.locCacheHits.Add(int64(len(cached)))
		n.readRound(ctx, keys, cands, got, nil)
		for _, i := range cached {
			if got[i] == nil {
				n.locs.Remove(keys[i])
			}
		}
	}
	var todo []int
	for i := range keys {
		if got[i] == nil {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		n.admitAll(ctx, keys, got, start)
		return got, errs
	}
	sub := make([]block.Key, len(todo))
	for j, i := range todo {
		sub[j] = keys[i]
	}
	hs, complete, _ := n.locateFast(ctx, sub)
	var unreached []string
	if !complete {
		// The index may lack blocks acknowledged under an earlier leader,
		// or the leader did not answer: ask the nodes themselves for the
		// keys the index has no holder for.
		var ask []int
		for j := range todo {
			if len(hs[j]) == 0 {
				ask = append(ask, j)
			}
		}
		if len(ask) > 0 {
			ak := make([]block.Key, len(ask))
			for x, j := range ask {
				ak[x] = sub[j]
			}
			ph, un := n.askPeers(ctx, ak)
			unreached = un
			for x, j := range ask {
				hs[j] = ph[x]
			}
		}
	}
	subCands := make([][]index.Holder, len(todo))
	for j := range todo {
		subCands[j] = n.candidates(hs[j])
	}
	subGot := make([]*Remote, len(todo))
	failed := make([][]string, len(todo))
	n.readRound(ctx, sub, subCands, subGot, failed)
	for j, i := range todo {
		if subGot[j] != nil {
			got[i] = subGot[j]
			continue
		}
		down := append(failed[j], unreached...)
		switch {
		case len(down) == 0:
			errs[i] = tier.ErrNotFound
		default:
			errs[i] = fmt.Errorf("%w: not on the nodes that answered; %v did not", tier.ErrNotFound, down)
		}
	}
	n.admitAll(ctx, keys, got, start)
	return got, errs
}

// readRound reads every key that has candidates and is not read yet, one
// request per holder for all of its keys, holders at once; keys a holder
// failed to serve go to their next candidate, until none is left. failed,
// if not nil, collects per key the holders that did not answer.
func (n *Node) readRound(ctx context.Context, keys []block.Key, cands [][]index.Holder, got []*Remote, failed [][]string) {
	next := make([]int, len(keys))
	for {
		batches := map[uint32][]int{}
		for i := range keys {
			if got[i] == nil && next[i] < len(cands[i]) {
				h := cands[i][next[i]].Node
				next[i]++
				if len(batches[h]) < maxRequestKeys {
					batches[h] = append(batches[h], i)
				}
			}
		}
		if len(batches) == 0 || ctx.Err() != nil {
			return
		}
		var (
			wg sync.WaitGroup
			mu sync.Mutex
		)
		for holder, idx := range batches {
			wg.Go(func() {
				ks := make([]block.Key, len(idx))
				for j, i := range idx {
					ks[j] = keys[i]
				}
				out, err := n.readFrom(ctx, holder, ks)
				mu.Lock()
				defer mu.Unlock()
				for j, i := range idx {
					if out[j] != nil {
						got[i] = out[j]
						n.locs.Add(keys[i], []uint32{holder})
					}
				}
				if err != nil {
					n.stats.fetchFailures.Add(1)
					n.log.Debug("cluster: reading blocks from another node", "holder", holder, "err", err)
					if failed != nil {
						name := n.nameOf(holder)
						for j, i := range idx {
							if out[j] == nil {
								failed[i] = append(failed[i], name)
							}
						}
					}
				}
			})
		}
		wg.Wait()
	}
}

// admitAll keeps local copies of blocks read, as Options.Admit says, unless
// they were deleted since the read began.
func (n *Node) admitAll(ctx context.Context, keys []block.Key, got []*Remote, start time.Time) {
	for i, f := range got {
		if f == nil || n.deletedSince(keys[i], start) {
			continue
		}
		admit := false
		switch n.opts.Admit {
		case AdmitAlways:
			admit = true
		case AdmitSecondHit:
			admit, _ = n.recent.ContainsOrAdd(keys[i], struct{}{})
		}
		if admit {
			n.admit(ctx, keys[i], f.Handle, f.Origin)
		}
	}
}

// locateFast asks the leader, with the fast client, for the holders of
// keys and whether its index is complete. Without a leader's answer every
// key has no holders, complete is false and err says why.
func (n *Node) locateFast(ctx context.Context, keys []block.Key) ([][]index.Holder, bool, error) {
	out := make([][]index.Holder, len(keys))
	li, ok := n.Leader()
	if !ok {
		return out, false, ErrNoLeader
	}
	n.stats.locates.Add(1)
	var resp holdersResponse
	err := n.call(ctx, n.fast, Member{Name: li.Name, Addrs: Addrs{HTTP: li.HTTP}}, "/internal/v1/locate", keysRequest{Keys: keys}, &resp)
	if err == nil && len(resp.Holders) != len(keys) {
		err = fmt.Errorf("%w: %d answers for %d keys", ErrBadRequest, len(resp.Holders), len(keys))
	}
	if err != nil {
		return out, false, fmt.Errorf("%w: %w", ErrNoLeader, err)
	}
	for i, x := range resp.Holders {
		for _, h := range x {
			var m index.TierMask
			for _, name := range h.Tiers {
				if lv := n.tierLevel(name); lv >= 0 {
					m = m.With(lv)
				}
			}
			out[i] = append(out[i], index.Holder{Node: h.Node, Tiers: m})
		}
	}
	return out, resp.Complete, nil
}

// candidates orders a block's holders for a read: not this node, members
// only, fastest tier first, at random among equals so readers spread.
func (n *Node) candidates(hs []index.Holder) []index.Holder {
	out := make([]index.Holder, 0, len(hs))
	for _, h := range hs {
		if h.Node == n.id {
			continue
		}
		if _, ok := n.memberByID(h.Node); ok {
			out = append(out, h)
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	slices.SortStableFunc(out, func(a, b index.Holder) int { return cmp.Compare(a.Tiers.Top(), b.Tiers.Top()) })
	return out
}

// admit stores a fetched block locally; failing to is not an error (the
// cache may be full of pinned blocks).
func (n *Node) admit(ctx context.Context, key block.Key, h *tier.Handle, o tier.Origin) {
	opts := tier.PutOptions{Checksum: h.Checksum(), HasChecksum: true, Meta: o.Info.Meta}
	if res, err := n.store.Put(ctx, key, h.Bytes(), opts); err == nil && res.Created {
		n.stats.admitted.Add(1)
	}
}

// fetchFrom reads key from node holder in one round trip; tier.ErrNotFound
// when the holder does not hold it.
func (n *Node) fetchFrom(ctx context.Context, key block.Key, holder uint32) (*tier.Handle, tier.Origin, error) {
	out, err := n.readFrom(ctx, holder, []block.Key{key})
	if out[0] != nil {
		return out[0].Handle, out[0].Origin, nil
	}
	if err == nil {
		err = fmt.Errorf("%w: %s does not hold %s", tier.ErrNotFound, n.nameOf(holder), key)
	}
	return nil, tier.Origin{}, err
}

// fetchRef gives a fetched block's bytes back to the budget, and its
// buffer to the pool, when the last handle on them is released.
type fetchRef struct {
	n      *Node
	w      int64
	buf    []byte
	budget func() // gives w back to Options.Budget
	refs   atomic.Int32
}

func (r *fetchRef) Retain() { r.refs.Add(1) }

func (r *fetchRef) Release() {
	if r.refs.Add(-1) == 0 {
		putBuf(r.buf)
		r.buf = nil
		r.n.bytes.Release(r.w)
		r.budget()
	}
}

// Buffers of fetched blocks come from pools by power-of-two size from
// 64 KiB to 64 MiB: a fresh buffer of a large block costs a pass of zeroing
// and garbage to collect for every read.
const (
	minPooled = 16 // 64 KiB
	maxPooled = 26 // 64 MiB
)

var bufPools [maxPooled + 1]sync.Pool

func poolClass(n int) int {
	c := minPooled
	for c <= maxPooled && 1<<c < n {
		c++
	}
	return c
}

// getBuf returns a buffer of n bytes, pooled when n is in the pooled range.
func getBuf(n int) []byte {
	c := poolClass(n)
	if n < 1<<minPooled || c > maxPooled {
		return make([]byte, n)
	}
	if p, ok := bufPools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<c)
}

// putBuf gives a buffer from getBuf back; others are left to the collector.
func putBuf(b []byte) {
	c := cap(b)
	if c < 1<<minPooled || c > 1<<maxPooled || c&(c-1) != 0 {
		return
	}
	b = b[:0]
	bufPools[poolClass(c)].Put(&b)
}

// load is how busy the node is serving blocks to others, 0 to 1: the
// replication core places new replicas away from busy nodes.
func (n *Node) load() float64 {
	return min(float64(n.stats.serving.Load())/float64(n.opts.MaxFetches), 1)
}
