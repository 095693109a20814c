package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/yuebing/yuebing/block"
)

// PullResult counts what a Pull did, key by key of its chain.
type PullResult struct {
	// Present keys were held here already; Pulled were copied here.
	Present int `json:"present"`
	Pulled  int `json:"pulled"`
	// Bytes is the size of the pulled blocks.
	Bytes int64 `json:"bytes"`
	// Missing keys no member holds: the chain's cached prefix ends at the
	// first of them, and Pull stops there.
	Missing int `json:"missing"`
}

// Pull copies the blocks of chain this node lacks from the nodes holding
// them, over the transfer service (checksums verified), and keeps them:
// how a scheduler's pull plan moves a prefix next to the engine that will
// use it. It goes in chain order and stops at the first block no member
// holds, since a prefix is only usable up to there. The copies reach the
// leader's index with the node's next report.
func (n *Node) Pull(ctx context.Context, chain []block.Key) (PullResult, error) {
	var res PullResult
	if n.closed.Load() {
		return res, ErrClosed
	}
	holders, err := n.locate(ctx, chain)
	if err != nil {
		return res, err
	}
	for i, k := range chain {
		if n.store.Contains(k) {
			res.Present++
			continue
		}
		var last error
		pulled := false
		for _, h := range n.candidates(holders[i]) {
			data, o, err := n.fetchFrom(ctx, k, h.Node)
			if err != nil {
				last = err
				n.stats.fetchFailures.Add(1)
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				continue
			}
			res.Bytes += int64(data.Len())
			n.admit(ctx, k, data, o)
			data.Release()
			pulled = true
			break
		}
		if !pulled {
			res.Missing = len(chain) - i
			if last != nil && !errors.Is(last, ErrNotMember) {
				return res, fmt.Errorf("cluster: pulling %s: %w", k, last)
			}
			return res, nil
		}
		res.Pulled++
	}
	return res, nil
}
