package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/yuebing/yuebing/block"
)

// ContextSpec describes a context to create: its blocks as tokens (keyed
// by the server with BlockSize, default 256), as chained keys, or as
// object names: exactly one of the three.
type ContextSpec struct {
	Namespace string
	Name      string
	// TTL is how long the blocks stay pinned; whole seconds, at least 1.
	TTL       time.Duration
	Tokens    []uint32
	BlockSize int
	Keys      []block.Key
	Names     []string
}

// Context is a context and where its blocks are: the body of the server's
// context answers (the server uses this type).
type Context struct {
	ID        string      `json:"id"`
	Namespace string      `json:"namespace"`
	Name      string      `json:"name,omitempty"`
	Keys      []block.Key `json:"keys"`
	// Tiers names, key by key, the fastest tier holding the block ("" when
	// not stored).
	Tiers []string `json:"tiers"`
	// Resident counts the context's blocks per tier.
	Resident   map[string]int `json:"resident"`
	Missing    int            `json:"missing"`
	CreatedAt  time.Time      `json:"created_at"`
	ExpiresAt  time.Time      `json:"expires_at"`
	TTLSeconds int64          `json:"ttl_seconds"`
}

func ttlSeconds(d time.Duration) (int64, error) {
	if d < time.Second || d%time.Second != 0 {
		return 0, fmt.Errorf("%w: TTL %v: want whole seconds, at least 1s", ErrBadRequest, d)
	}
	return int64(d / time.Second), nil
}

// CreateContext pins a context's blocks for its TTL.
func (c *Client) CreateContext(ctx context.Context, spec ContextSpec) (*Context, error) {
	ttl, err := ttlSeconds(spec.TTL)
	if err != nil {
		return nil, err
	}
	in := struct {
		Namespace  string      `json:"namespace"`
		Name       string      `json:"name,omitempty"`
		TTLSeconds int64       `json:"ttl_seconds"`
		Tokens     []uint32    `json:"tokens,omitempty"`
		BlockSize  int         `json:"block_size,omitempty"`
		Keys       []block.Key `json:"keys,omitempty"`
		Names      []string    `json:"names,omitempty"`
	}{spec.Namespace, spec.Name, ttl, spec.Tokens, spec.BlockSize, spec.Keys, spec.Names}
	var out Context
	if err := c.doJSON(ctx, http.MethodPost, "/v1/contexts", in, &out, http.StatusCreated); err != nil {
		return nil, err
	}
	return &out, nil
}

// Context returns a live context and where its blocks are now.
func (c *Client) Context(ctx context.Context, id string) (*Context, error) {
	var out Context
	if err := c.doJSON(ctx, http.MethodGet, "/v1/contexts/"+url.PathEscape(id), nil, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExtendContext sets a context to expire ttl from now.
func (c *Client) ExtendContext(ctx context.Context, id string, ttl time.Duration) (*Context, error) {
	sec, err := ttlSeconds(ttl)
	if err != nil {
		return nil, err
	}
	var out Context
	in := map[string]int64{"ttl_seconds": sec}
	if err := c.doJSON(ctx, http.MethodPatch, "/v1/contexts/"+url.PathEscape(id), in, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteContext removes a context and releases its pins.
func (c *Client) DeleteContext(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/contexts/"+url.PathEscape(id), nil, nil, http.StatusOK)
}

// ContextSummary is a context in a listing.
type ContextSummary struct {
	ID        string    `json:"id"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name,omitempty"`
	Blocks    int       `json:"blocks"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// ListOptions select a page of contexts.
type ListOptions struct {
	// Namespace, when set, lists only its contexts.
	Namespace string
	// Limit is the page size; 0 means the server's default (100).
	Limit int
	// Cursor continues a listing from a previous page's NextCursor.
	Cursor string
}

// ContextPage is a page of contexts.
type ContextPage struct {
	Contexts []ContextSummary `json:"contexts"`
	// NextCursor is "" on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// ListContexts returns a page of the live contexts the caller may see, in
// id order.
func (c *Client) ListContexts(ctx context.Context, opts ListOptions) (ContextPage, error) {
	q := url.Values{}
	if opts.Namespace != "" {
		q.Set("namespace", opts.Namespace)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	path := "/v1/contexts"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out ContextPage
	err := c.doJSON(ctx, http.MethodGet, path, nil, &out, http.StatusOK)
	return out, err
}

// TierStats are one tier's counters.
type TierStats struct {
	Level      int    `json:"level"`
	Name       string `json:"name"`
	Capacity   int64  `json:"capacity_bytes"`
	Used       int64  `json:"used_bytes"`
	Blocks     int64  `json:"blocks"`
	Pinned     int64  `json:"pinned_bytes"`
	Hits       int64  `json:"hits"`
	Misses     int64  `json:"misses"`
	Puts       int64  `json:"puts"`
	Deletes    int64  `json:"deletes"`
	Evictions  int64  `json:"evictions"`
	Corrupt    int64  `json:"corrupt"`
	Demotions  int64  `json:"demotions"`
	Promotions int64  `json:"promotions"`
}

// Stats are the node's counters (GET /v1/stats; admin only).
type Stats struct {
	Store struct {
		Tiers            []TierStats `json:"tiers"`
		Blocks           int64       `json:"blocks"`
		Hits             int64       `json:"hits"`
		Misses           int64       `json:"misses"`
		DroppedDemotions int64       `json:"dropped_demotions"`
		IndexBytes       int64       `json:"index_bytes"`
	} `json:"store"`
	Contexts      int     `json:"contexts"`
	InflightBytes int64   `json:"inflight_bytes"`
	UptimeSeconds float64 `json:"uptime_seconds"`
}

// Stats returns the node's counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var out Stats
	err := c.doJSON(ctx, http.MethodGet, "/v1/stats", nil, &out, http.StatusOK)
	return out, err
}

// Tiers returns the node's tiers, fastest first (admin only).
func (c *Client) Tiers(ctx context.Context) ([]TierStats, error) {
	var out struct {
		Tiers []TierStats `json:"tiers"`
	}
	err := c.doJSON(ctx, http.MethodGet, "/v1/tiers", nil, &out, http.StatusOK)
	return out.Tiers, err
}
