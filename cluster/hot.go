package cluster

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma/tcp"
	"github.com/yuebing/yuebing/replicate"
)

// MaxHot bounds one hot-blocks answer: an operator's page, not an export.
const MaxHot = 1000

// HotBlock is one of the hottest blocks the leader tracks.
type HotBlock struct {
	Key block.Key `json:"key"`
	// Heat is the block's hits in the replication window.
	Heat uint32 `json:"heat"`
	// Replicas counts the live holders; Desired is the count replication
	// works towards.
	Replicas int `json:"replicas"`
	Desired  int `json:"desired"`
	// InFlight counts copies and drops under way.
	InFlight int  `json:"in_flight"`
	Pinned   bool `json:"pinned"`
}

type hotRequest struct {
	Limit int `json:"limit"`
}

type hotResponse struct {
	Blocks []HotBlock `json:"blocks"`
}

// Hot returns up to limit of the blocks the leader sees read most in its
// heat window, hottest first.
func (n *Node) Hot(ctx context.Context, limit int) ([]HotBlock, error) {
	if limit < 1 || limit > MaxHot {
		return nil, fmt.Errorf("%w: limit %d, want 1 to %d", ErrBadRequest, limit, MaxHot)
	}
	var resp hotResponse
	if err := n.callLeader(ctx, "/internal/v1/hot", hotRequest{Limit: limit}, &resp); err != nil {
		return nil, err
	}
	return resp.Blocks, nil
}

func (n *Node) handleHot(w http.ResponseWriter, r *http.Request) {
	leaderCall(n, w, r, func(l *leader, req hotRequest) (hotResponse, error) {
		if req.Limit < 1 || req.Limit > MaxHot {
			return hotResponse{}, fmt.Errorf("%w: limit %d, want 1 to %d", ErrBadRequest, req.Limit, MaxHot)
		}
		return hotResponse{Blocks: l.hot(req.Limit)}, nil
	})
}

func (l *leader) hot(limit int) []HotBlock {
	out := []HotBlock{}
	l.drv.Inspect(func(c *replicate.Core) {
		for _, b := range c.Top(time.Now(), limit) {
			out = append(out, HotBlock{Key: b.Key, Heat: b.Heat, Replicas: b.Replicas, Desired: b.Desired, InFlight: b.InFlight, Pinned: b.Pinned})
		}
	})
	return out
}

// TransferStats returns the counters of the node's transfer service, or
// false when its transport keeps none.
func (n *Node) TransferStats() (tcp.Stats, bool) {
	if t, ok := n.engine.Transport().(*tcp.Transport); ok {
		return t.Stats(), true
	}
	return tcp.Stats{}, false
}
