package client

import (
	"context"
	"net/http"

	"github.com/yuebing/yuebing/block"
)

// NodeMatch is one node's share of a cluster prefix query.
type NodeMatch struct {
	Node      uint32         `json:"node"`
	Name      string         `json:"name"`
	PrefixLen int            `json:"prefix_len"`
	Tiers     map[string]int `json:"tiers"`
}

// ClusterQuery asks the cluster which nodes hold the longest prefix of
// chain (POST /v1/cluster/query, admin): per node, the prefix length and
// its per-tier counts, longest first.
func (c *Client) ClusterQuery(ctx context.Context, chain []block.Key) ([]NodeMatch, error) {
	var out struct {
		Nodes []NodeMatch `json:"nodes"`
	}
	err := c.doJSON(ctx, http.MethodPost, "/v1/cluster/query", map[string]any{"keys": chain}, &out, http.StatusOK)
	return out.Nodes, err
}

// Holder is a node holding a block.
type Holder struct {
	Node  uint32   `json:"node"`
	Name  string   `json:"name"`
	Tiers []string `json:"tiers"`
}

// ClusterHolders returns the nodes holding each key, in order (POST
// /v1/cluster/holders, admin).
func (c *Client) ClusterHolders(ctx context.Context, keys []block.Key) ([][]Holder, error) {
	var out struct {
		Blocks []struct {
			Nodes []Holder `json:"nodes"`
		} `json:"blocks"`
	}
	if err := c.doJSON(ctx, http.MethodPost, "/v1/cluster/holders", map[string]any{"keys": keys}, &out, http.StatusOK); err != nil {
		return nil, err
	}
	hs := make([][]Holder, len(out.Blocks))
	for i, b := range out.Blocks {
		hs[i] = b.Nodes
	}
	return hs, nil
}

// SetReplicas changes a block's replica count cluster-wide (POST
// /v1/blocks/{key}/replicas).
func (c *Client) SetReplicas(ctx context.Context, key block.Key, count int) error {
	return c.doJSON(ctx, http.MethodPost, "/v1/blocks/"+key.String()+"/replicas", map[string]int{"count": count}, nil, http.StatusOK)
}
