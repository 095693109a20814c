package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/tier"
)

// A read is one round trip: the reader names the blocks it wants of one
// holder in one Get over the transfer service, and the holder answers each
// key in order, found (size, CRC-32C, the attribute below) then the bytes,
// or not held, written straight from its pinned copies (serve.go). The
// reader verifies each block's CRC-32C before it serves a byte of it. There
// is no expose, no release and no segment to open: a read of one block
// costs the same single round trip as a read of 64.

// readFrom reads keys from node holder in one round trip over the
// transfer service by key (docs/transfer.md#blocks-by-key). out[i] is nil
// when the holder does not hold keys[i], or when the read budget
// (MaxFetchBytes) ran out before it: the caller treats both as not read
// here. An error means the holder did not answer (ErrUnreachable) or
// answered garbage; blocks read before it are returned with it. Errors name
// the holder, never its address.
func (n *Node) readFrom(ctx context.Context, holder uint32, keys []block.Key) ([]*Remote, error) {
	out := make([]*Remote, len(keys))
	m, ok := n.memberByID(holder)
	if !ok {
		return out, fmt.Errorf("%w: node %d", ErrNotMember, holder)
	}
	ctx, done, err := n.fetchSlot(ctx)
	if err != nil {
		return out, err
	}
	defer done()
	st, err := n.engine.GetBlocks(ctx, m.Addrs.Transfer, keys, int64(n.opts.MaxFetchBytes))
	if err != nil {
		return out, n.transferErr(ctx, m, err)
	}
	defer st.Close()
	for i, k := range keys {
		info, err := st.Next()
		if err != nil {
			return out, fmt.Errorf("%w: %s broke off its answer: %v", ErrUnreachable, m.Name, err)
		}
		if !info.Found {
			continue
		}
		a, err := answerOf(info)
		if err != nil {
			return out, fmt.Errorf("%w: %s: %w", ErrUnreachable, m.Name, err)
		}
		w := max(a.size, 1)
		if i == 0 {
			err = n.bytes.Acquire(ctx, w)
		} else if !n.bytes.TryAcquire(w) {
			// Holding earlier blocks while waiting for room could wait on
			// ourselves: the rest of the batch is read another time.
			return out, nil
		}
		if err != nil {
			return out, err
		}
		giveBack, ok, err := n.charge(ctx, w, i == 0)
		if !ok {
			n.bytes.Release(w)
			return out, err
		}
		buf := getBuf(int(a.size))
		ref := &fetchRef{n: n, w: w, buf: buf, budget: giveBack}
		ref.refs.Store(1)
		if err := st.ReadData(buf); err != nil {
			ref.Release()
			return out, fmt.Errorf("%w: %s broke off its answer: %v", ErrUnreachable, m.Name, err)
		}
		if sum := block.Checksum(buf); sum != a.checksum {
			ref.Release()
			return out, fmt.Errorf("%w: %s from %s: crc32c %08x, holder says %08x", tier.ErrCorrupt, k, m.Name, sum, a.checksum)
		}
		n.stats.fetchedBytes.Add(a.size)
		out[i] = &Remote{Handle: tier.NewHandle(buf, a.checksum, ref), Origin: a.origin(m.Name)}
	}
	return out, nil
}

// fetchSlot takes one of the node's MaxFetches reads from other nodes and
// bounds ctx by RequestTimeout; done gives both back.
func (n *Node) fetchSlot(ctx context.Context) (_ context.Context, done func(), _ error) {
	if err := n.fetches.Acquire(ctx, 1); err != nil {
		return ctx, nil, err
	}
	n.stats.fetches.Add(1)
	ctx, cancel := context.WithTimeout(ctx, n.opts.RequestTimeout)
	return ctx, func() {
		cancel()
		n.fetches.Release(1)
	}, nil
}

// transferErr words a failure to read from m over the transfer service:
// the caller's context ending is that; anything else is m unreachable.
func (n *Node) transferErr(ctx context.Context, m Member, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
		return cerr
	}
	n.log.Debug("cluster: transfer service of another node", "holder", m.Name, "err", err)
	return fmt.Errorf("%w: %s", ErrUnreachable, m.Name)
}

// answer is what a holder said about one key.
type answer struct {
	found       bool
	size        int64
	checksum    uint32
	pinnedUntil int64
	meta        []byte
	retention   tier.Retention
	retainUntil int64
}

func (a *answer) origin(source string) tier.Origin {
	o := tier.Origin{Level: tier.RemoteLevel, Source: source, Info: tier.BlockInfo{
		Size: a.size, Checksum: a.checksum, HasChecksum: true, Meta: a.meta,
	}}
	if len(a.meta) == 0 {
		o.Info.Meta = nil
	}
	if a.pinnedUntil > 0 {
		o.Info.PinnedUntil = time.Unix(a.pinnedUntil, 0)
	}
	o.Info.Retention = a.retention
	if a.retainUntil > 0 {
		o.Info.RetainUntil = time.Unix(a.retainUntil, 0)
	}
	return o
}

// answerOf reads a found block's answer from the transfer service.
func answerOf(info rdma.BlockInfo) (answer, error) {
	a := answer{found: true, size: info.Size, checksum: info.Checksum}
	var err error
	a.pinnedUntil, a.retention, a.retainUntil, a.meta, err = decodeClassAttr(info.Attr)
	return a, err
}

// charge takes w bytes from the node's shared budget, if it has one. The
// first block of a read may wait the budget's bounded wait; later ones take
// what is free now, as with MaxFetchBytes. ok false with a nil error: the
// rest of the batch is read another time.
func (n *Node) charge(ctx context.Context, w int64, first bool) (giveBack func(), ok bool, err error) {
	if n.opts.Budget == nil {
		return func() {}, true, nil
	}
	if !first {
		giveBack, ok = n.opts.Budget.TryAcquire(w)
		return giveBack, ok, nil
	}
	giveBack, err = n.opts.Budget.Acquire(ctx, w)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return giveBack, true, nil
}
