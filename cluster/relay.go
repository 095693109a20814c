package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/tier"
)

// ErrNotRelayed reports a block Relay leaves to ReadMany: one this node
// keeps a copy of when it reads it (Options.Admit), or one whose holder's
// transfer service cannot read by key.
var ErrNotRelayed = errors.New("cluster: block not relayed")

// Relayed is a block on its way from the node holding it: what the holder
// said about it, and its bytes, to be written once with WriteTo.
type Relayed struct {
	// Origin names the holder and carries the block's size, CRC-32C (as
	// stored, for the final reader to check), record and pin.
	Origin tier.Origin
	st     rdma.BlockStream
}

// WriteTo copies the block's bytes to w. Where w is a TCP connection the
// kernel moves them from the holder's connection to w's without a copy
// through this process, which is why a relay does not check them: the
// checksum in Origin travels with them for the reader to check, as with a
// block read from this node's own DRAM.
func (r Relayed) WriteTo(w io.Writer) (int64, error) { return r.st.WriteData(w) }

// Relay reads key from a node that holds it and hands it to send without
// keeping it here: send sees the holder's answer before any of the block's
// bytes are read, so it can still refuse (its error is returned), and
// otherwise writes them with WriteTo. Holders are tried as ReadMany tries
// them until one has the block; once send has it, no other is tried.
//
// A block this node would keep a copy of (Options.Admit) is not relayed:
// Relay returns ErrNotRelayed without reading, and the caller reads it with
// ReadMany. A block no reachable node holds is tier.ErrNotFound.
func (n *Node) Relay(ctx context.Context, key block.Key, send func(Relayed) error) error {
	if n.closed.Load() || !n.started.Load() {
		return tier.ErrNotFound
	}
	switch n.opts.Admit {
	case AdmitAlways:
		return ErrNotRelayed
	case AdmitSecondHit:
		if n.recent.Contains(key) {
			return ErrNotRelayed
		}
	}
	var cands []index.Holder
	cached := false
	if ids, ok := n.locs.Get(key); ok {
		for _, id := range ids {
			cands = append(cands, index.Holder{Node: id})
		}
		cached = true
		n.stats.locCacheHits.Add(1)
	}
	var down []string
	tried := map[uint32]bool{}
	for round := 0; round < 2; round++ {
		for _, h := range cands {
			if tried[h.Node] {
				continue
			}
			tried[h.Node] = true
			done, err := n.relayFrom(ctx, h.Node, key, send)
			if done {
				return err
			}
			if err != nil {
				if errors.Is(err, ErrNotRelayed) || ctx.Err() != nil {
					return err
				}
				down = append(down, n.nameOf(h.Node))
			}
			if cached {
				n.locs.Remove(key)
				cached = false
			}
		}
		if round == 1 {
			break
		}
		// Not where it was last found: ask the leader, and the nodes
		// themselves when the leader's index may lack it.
		hs, complete, _ := n.locateFast(ctx, []block.Key{key})
		if len(hs[0]) == 0 && !complete {
			ph, un := n.askPeers(ctx, []block.Key{key})
			hs[0], down = ph[0], append(down, un...)
		}
		cands = n.candidates(hs[0])
	}
	if len(down) > 0 {
		return fmt.Errorf("%w: not on the nodes that answered; %v did not", tier.ErrNotFound, down)
	}
	return tier.ErrNotFound
}

// relayFrom asks holder for key. done is true once the holder had the
// block and send was called: err is then send's (or the copy's). done false
// with a nil error: the holder does not have it.
func (n *Node) relayFrom(ctx context.Context, holder uint32, key block.Key, send func(Relayed) error) (done bool, err error) {
	m, ok := n.memberByID(holder)
	if !ok {
		return false, nil
	}
	ctx, release, err := n.fetchSlot(ctx)
	if err != nil {
		return false, err
	}
	defer release()
	st, err := n.engine.GetBlocks(ctx, m.Addrs.Transfer, []block.Key{key}, int64(n.opts.MaxFetchBytes))
	if errors.Is(err, rdma.ErrNotSupported) {
		return false, ErrNotRelayed
	}
	if err != nil {
		n.stats.fetchFailures.Add(1)
		return false, n.transferErr(ctx, m, err)
	}
	defer st.Close()
	info, err := st.Next()
	if err != nil {
		n.stats.fetchFailures.Add(1)
		return false, n.transferErr(ctx, m, err)
	}
	if !info.Found {
		return false, nil
	}
	a, err := answerOf(info)
	if err != nil {
		n.stats.fetchFailures.Add(1)
		return false, fmt.Errorf("%w: %s: %w", ErrUnreachable, m.Name, err)
	}
	n.locs.Add(key, []uint32{holder})
	if n.opts.Admit == AdmitSecondHit {
		n.recent.Add(key, struct{}{})
	}
	sent := &countingStream{BlockStream: st}
	err = send(Relayed{Origin: a.origin(m.Name), st: sent})
	n.stats.fetchedBytes.Add(sent.n)
	if err == nil && sent.n == a.size {
		n.stats.relayed.Add(1)
	}
	return true, err
}

// countingStream counts the bytes WriteData moved.
type countingStream struct {
	rdma.BlockStream
	n int64
}

func (c *countingStream) WriteData(w io.Writer) (int64, error) {
	n, err := c.BlockStream.WriteData(w)
	c.n += n
	return n, err
}
