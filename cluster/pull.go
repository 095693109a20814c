package cluster

import (
	"context"

	"github.com/yuebing/yuebing/block"
)

// PullResult counts what a Pull did, key by key of its chain.
type PullResult struct {
	// Present keys were held here already; Pulled were copied here.
	Present int `json:"present"`
	Pulled  int `json:"pulled"`
	// Bytes is the size of the pulled blocks.
	Bytes int64 `json:"bytes"`
	// Missing keys are those from the first one no member could give to
	// the chain's end: the cached prefix ends there, and Pull stops.
	Missing int `json:"missing"`
}

// Pull copies the blocks of chain this node lacks from the nodes holding
// them, over the transfer service (checksums verified, as ReadMany reads),
// and keeps them whatever Options.Admit says: how a scheduler's pull plan
// moves a prefix next to the engine that will use it. Blocks count in chain
// order up to the first that no member could give, since a prefix is only
// usable up to there; blocks read past it are kept too. The copies reach
// the leader's index with the node's next report.
func (n *Node) Pull(ctx context.Context, chain []block.Key) (PullResult, error) {
	var res PullResult
	if n.closed.Load() {
		return res, ErrClosed
	}
	var need []block.Key
	var at []int
	for i, k := range chain {
		if !n.store.Contains(k) {
			need = append(need, k)
			at = append(at, i)
		}
	}
	got := make([]*Remote, len(chain))
	if len(need) > 0 {
		rs, _ := n.ReadMany(ctx, need)
		for j, r := range rs {
			got[at[j]] = r
		}
	}
	stopped := false
	for i, k := range chain {
		r := got[i]
		switch {
		case r != nil:
			n.admit(ctx, k, r.Handle, r.Origin)
			if !stopped {
				res.Pulled++
				res.Bytes += int64(r.Handle.Len())
			}
			r.Handle.Release()
		case stopped:
		case n.store.Contains(k):
			res.Present++
		default:
			stopped = true
			res.Missing = len(chain) - i
		}
	}
	return res, ctx.Err()
}
