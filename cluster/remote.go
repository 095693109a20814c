package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/tier"
)

var _ tier.RemoteReader = (*Node)(nil)

// ReadRemote implements tier.RemoteReader: it asks the leader which nodes
// hold key, then reads the block from one of them over the transfer
// service, fastest tier first, verifying its checksum. A block read this
// way is admitted to the local store as Options.Admit says; the handle is
// the caller's either way.
func (n *Node) ReadRemote(ctx context.Context, key block.Key) (*tier.Handle, tier.Origin, error) {
	if n.closed.Load() {
		return nil, tier.Origin{}, tier.ErrNotFound
	}
	holders, err := n.locate(ctx, []block.Key{key})
	if err != nil {
		if errors.Is(err, ErrNoLeader) {
			// Without a leader nobody knows where blocks are: a miss.
			return nil, tier.Origin{}, fmt.Errorf("%w: %w", tier.ErrNotFound, err)
		}
		return nil, tier.Origin{}, err
	}
	cands := n.candidates(holders[0])
	if len(cands) == 0 {
		return nil, tier.Origin{}, tier.ErrNotFound
	}
	var last error
	for _, h := range cands {
		data, o, err := n.fetchFrom(ctx, key, h.Node)
		if err != nil {
			last = err
			n.stats.fetchFailures.Add(1)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		admit := false
		switch n.opts.Admit {
		case AdmitAlways:
			admit = true
		case AdmitSecondHit:
			admit, _ = n.recent.ContainsOrAdd(key, struct{}{})
		}
		if admit {
			n.admit(ctx, key, data, o)
		}
		return data, o, nil
	}
	if last == nil || errors.Is(last, tier.ErrNotFound) {
		return nil, tier.Origin{}, tier.ErrNotFound
	}
	return nil, tier.Origin{}, last
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

// fetchFrom reads key from node holder: the holder exposes the block in a
// segment, this node READs it into a registered buffer of its own, the
// holder's pin is released, and the bytes are checked against the holder's
// checksum. The returned handle owns the buffer and gives its share of
// MaxFetchBytes back on release.
func (n *Node) fetchFrom(ctx context.Context, key block.Key, holder uint32) (*tier.Handle, tier.Origin, error) {
	m, ok := n.memberByID(holder)
	if !ok {
		return nil, tier.Origin{}, fmt.Errorf("%w: node %d", ErrNotMember, holder)
	}
	if err := n.fetches.Acquire(ctx, 1); err != nil {
		return nil, tier.Origin{}, err
	}
	defer n.fetches.Release(1)
	n.stats.fetches.Add(1)
	var ex exposeResponse
	if err := n.postJSON(ctx, m.Addrs.HTTP, "/internal/v1/expose", keyRequest{Key: key}, &ex); err != nil {
		return nil, tier.Origin{}, fmt.Errorf("cluster: %s exposing %s: %w", m.Name, key, err)
	}
	defer func() {
		// Release even when the read failed, on a context of its own: the
		// reader's may be what ended.
		rctx, cancel := context.WithTimeout(n.ctx, n.opts.RequestTimeout)
		defer cancel()
		if ex.Segment != "" {
			_ = n.postJSON(rctx, m.Addrs.HTTP, "/internal/v1/release", releaseRequest{ID: ex.ID}, nil)
		}
	}()
	inline := ex.Segment == ""
	if ex.Size < 0 || ex.Size > n.opts.MaxFetchBytes || inline && int64(len(ex.Data)) != ex.Size || !inline && (ex.Size == 0 || ex.Data != nil) {
		return nil, tier.Origin{}, fmt.Errorf("%w: %s exposed %d bytes in segment %q with %d inline", ErrBadRequest, m.Name, ex.Size, ex.Segment, len(ex.Data))
	}
	if err := n.bytes.Acquire(ctx, max(ex.Size, 1)); err != nil {
		return nil, tier.Origin{}, err
	}
	ref := &fetchRef{n: n, w: max(ex.Size, 1)}
	ref.refs.Store(1)
	buf := ex.Data
	if buf == nil {
		buf = []byte{}
	}
	if !inline {
		buf = make([]byte, ex.Size)
		if err := n.read(ctx, m.Addrs.Transfer, ex.Segment, buf); err != nil {
			ref.Release()
			return nil, tier.Origin{}, fmt.Errorf("cluster: reading %s from %s: %w", key, m.Name, err)
		}
	}
	if sum := block.Checksum(buf); sum != ex.Checksum {
		ref.Release()
		return nil, tier.Origin{}, fmt.Errorf("%w: %s from %s: crc32c %08x, holder says %08x", tier.ErrCorrupt, key, m.Name, sum, ex.Checksum)
	}
	n.stats.fetchedBytes.Add(ex.Size)
	o := tier.Origin{Level: tier.RemoteLevel, Source: m.Name, Info: tier.BlockInfo{
		Size: ex.Size, Checksum: ex.Checksum, HasChecksum: true, Meta: ex.Meta,
	}}
	if ex.PinnedUntil > 0 {
		o.Info.PinnedUntil = time.Unix(ex.PinnedUntil, 0)
	}
	return tier.NewHandle(buf, ex.Checksum, ref), o, nil
}

// read READs a remote segment whole into buf.
func (n *Node) read(ctx context.Context, peer, segment string, buf []byte) error {
	name := "in/" + strconv.FormatUint(n.segSeq.Add(1), 10)
	local, err := n.engine.Register(name, "cpu:0", buf)
	if err != nil {
		return err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), n.opts.RequestTimeout)
		defer cancel()
		_ = n.engine.Unregister(uctx, name)
	}()
	remote, err := n.engine.OpenSegment(ctx, peer, segment)
	if err != nil {
		return err
	}
	defer remote.Close(context.Background())
	if remote.Size() != uint64(len(buf)) {
		return fmt.Errorf("%w: segment %q has %d bytes, want %d", ErrBadRequest, segment, remote.Size(), len(buf))
	}
	b, err := n.engine.AllocateBatch(1)
	if err != nil {
		return err
	}
	defer b.Free()
	if _, err := b.Submit(ctx, rdma.Request{Op: rdma.Read, Local: local, Remote: remote, Length: uint64(len(buf))}); err != nil {
		return err
	}
	st, err := b.Wait(ctx)
	if err != nil {
		return err
	}
	if st.State != rdma.Completed {
		return fmt.Errorf("transfer %s: %w", st.State, st.Err)
	}
	return nil
}

// fetchRef gives a fetched block's bytes back to the budget when the last
// handle on them is released.
type fetchRef struct {
	n    *Node
	w    int64
	refs atomic.Int32
}

func (r *fetchRef) Retain() { r.refs.Add(1) }

func (r *fetchRef) Release() {
	if r.refs.Add(-1) == 0 {
		r.n.bytes.Release(r.w)
	}
}

// load is how busy the node is serving blocks to others, 0 to 1: the
// replication core places new replicas away from busy nodes.
func (n *Node) load() float64 {
	return float64(n.exp.len()) / float64(n.opts.MaxExposed)
}
