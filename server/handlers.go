package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/tier"
)

// keysRequestBody is the body of POST /v1/keys.
type chainRequest struct {
	Namespace string   `json:"namespace"`
	BlockSize int      `json:"block_size,omitempty"`
	Tokens    []uint32 `json:"tokens"`
}

type chainResponse struct {
	Namespace string      `json:"namespace"`
	BlockSize int         `json:"block_size"`
	Keys      []block.Key `json:"keys"`
	// Tokens is how many tokens the keys cover: a trailing partial block
	// has no key.
	Tokens int `json:"tokens"`
}

// chainKeys validates a namespace, block size and tokens and keys them.
func chainKeys(p auth.Principal, ns string, blockSize int, tokens []uint32) ([]block.Key, int, error) {
	if blockSize == 0 {
		blockSize = block.DefaultBlockSize
	}
	if err := block.ValidateNamespace(ns); err != nil {
		return nil, 0, err
	}
	if err := p.Authorize(ns); err != nil {
		return nil, 0, err
	}
	keys, err := block.ChainKeys(ns, blockSize, tokens)
	return keys, blockSize, err
}

func (a *API) postKeys(c *gin.Context) {
	var req chainRequest
	if err := a.decodeJSON(c, &req); err != nil {
		a.fail(c, err)
		return
	}
	keys, bs, err := chainKeys(principal(c), req.Namespace, req.BlockSize, req.Tokens)
	if err != nil {
		a.fail(c, err)
		return
	}
	if keys == nil {
		keys = []block.Key{}
	}
	c.JSON(http.StatusOK, chainResponse{Namespace: req.Namespace, BlockSize: bs, Keys: keys, Tokens: len(keys) * bs})
}

// createContextRequest is the body of POST /v1/contexts: the blocks as
// tokens (keyed like POST /v1/keys), chained keys, or object names.
type createContextRequest struct {
	Namespace  string      `json:"namespace"`
	Name       string      `json:"name,omitempty"`
	TTLSeconds *int64      `json:"ttl_seconds"`
	Tokens     []uint32    `json:"tokens,omitempty"`
	BlockSize  int         `json:"block_size,omitempty"`
	Keys       []block.Key `json:"keys,omitempty"`
	Names      []string    `json:"names,omitempty"`
	// Retention, when set, gives the context's stored blocks that class
	// until the context expires (docs/retention.md); pinned is charged to
	// the namespace's quota.
	Retention string `json:"retention,omitempty"`
}

type patchContextRequest struct {
	TTLSeconds *int64 `json:"ttl_seconds"`
}

// maxContextName bounds a context's display name.
const maxContextName = 256

// contextView is a context with where its blocks are: the Go client's
// type, so the two ends share one definition of the answer.
type contextView = client.Context

// contextSummary is a context in a listing, the client's type as well.
type contextSummary = client.ContextSummary

// listContextsResponse is a page of contexts, the client's type as well.
type listContextsResponse = client.ContextPage

func (a *API) ttl(sec *int64) (time.Duration, error) {
	if sec == nil {
		return 0, fmt.Errorf("%w: ttl_seconds is required", ErrBadRequest)
	}
	maxSec := int64(a.opts.Contexts.MaxTTL / time.Second)
	if *sec <= 0 || *sec > maxSec {
		return 0, fmt.Errorf("%w: ttl_seconds %d: want 1 to %d (contexts.max_ttl)", ErrBadRequest, *sec, maxSec)
	}
	return time.Duration(*sec) * time.Second, nil
}

func (a *API) createContext(c *gin.Context) {
	var req createContextRequest
	if err := a.decodeJSON(c, &req); err != nil {
		a.fail(c, err)
		return
	}
	p := principal(c)
	ttl, err := a.ttl(req.TTLSeconds)
	if err != nil {
		a.fail(c, err)
		return
	}
	if len(req.Name) > maxContextName {
		a.fail(c, fmt.Errorf("%w: name of %d bytes, at most %d", ErrBadRequest, len(req.Name), maxContextName))
		return
	}
	given := 0
	for _, n := range []int{len(req.Tokens), len(req.Keys), len(req.Names)} {
		if n > 0 {
			given++
		}
	}
	if given != 1 {
		a.fail(c, fmt.Errorf("%w: give exactly one of tokens, keys or names", ErrBadRequest))
		return
	}
	if req.BlockSize != 0 && len(req.Tokens) == 0 {
		a.fail(c, fmt.Errorf("%w: block_size applies to tokens only", ErrBadRequest))
		return
	}
	var keys []block.Key
	if len(req.Tokens) > 0 {
		if keys, _, err = chainKeys(p, req.Namespace, req.BlockSize, req.Tokens); err != nil {
			a.fail(c, err)
			return
		}
		if len(keys) == 0 {
			a.fail(c, fmt.Errorf("%w: %d tokens make no full block", ErrBadRequest, len(req.Tokens)))
			return
		}
		if len(keys) > a.limits.MaxBatchKeys {
			a.fail(c, fmt.Errorf("%w: %d blocks in one context, limits.max_batch_keys is %d", ErrTooLarge, len(keys), a.limits.MaxBatchKeys))
			return
		}
	} else {
		kr := keysRequest{Namespace: req.Namespace, Keys: req.Keys, Names: req.Names}
		ts, err := kr.targets(p, a.limits.MaxBatchKeys)
		if err != nil {
			a.fail(c, err)
			return
		}
		for _, t := range ts {
			keys = append(keys, t.key)
		}
	}
	ret, err := parseRetention(req.Retention, "", a.opts.Now())
	if err != nil {
		a.fail(c, fmt.Errorf("%w (the retention field)", err))
		return
	}
	undo := func() {}
	if ret.set {
		ret.until = a.opts.Now().Add(ttl)
		if undo, err = a.retainAll(req.Namespace, keys, ret); err != nil {
			a.fail(c, err)
			return
		}
	}
	rec, err := a.contexts.create(req.Namespace, req.Name, keys, ttl)
	if err != nil {
		undo()
		a.fail(c, err)
		return
	}
	a.publish(c.Request.Context(), a.heldKeys(rec.Keys)...) // the pins
	c.JSON(http.StatusCreated, a.view(rec))
}

// heldKeys returns the keys this node holds, for publishing their pins.
func (a *API) heldKeys(keys []block.Key) []block.Key {
	if a.opts.Cluster == nil {
		return nil
	}
	var out []block.Key
	for _, k := range keys {
		if a.store.Contains(k) {
			out = append(out, k)
		}
	}
	return out
}

// view reports where a context's blocks are. Only blocks recorded under
// the context's namespace count.
func (a *API) view(r contextRecord) contextView {
	v := contextView{
		ID: r.ID, Namespace: r.Namespace, Name: r.Name, Keys: r.Keys,
		Tiers: make([]string, len(r.Keys)), Resident: map[string]int{},
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		TTLSeconds: max(int64(r.ExpiresAt.Sub(a.opts.Now())/time.Second), 0),
	}
	for _, t := range a.store.Tiers() {
		v.Resident[t.Name()] = 0
	}
	for i, k := range r.Keys {
		if level, ok := recordedIn(a.store, k, r.Namespace); ok {
			v.Tiers[i] = a.tierName(level)
			v.Resident[v.Tiers[i]]++
		} else {
			v.Missing++
		}
	}
	return v
}

// contextFor returns the live context named in the path if p may see it.
func (a *API) contextFor(c *gin.Context) (contextRecord, error) {
	id := c.Param("id")
	if err := validContextID(id); err != nil {
		return contextRecord{}, err
	}
	r, ok := a.contexts.get(id)
	if !ok || !principal(c).CanAccess(r.Namespace) {
		return contextRecord{}, fmt.Errorf("%w: context %s", ErrNotFound, id)
	}
	return r, nil
}

func (a *API) getContext(c *gin.Context) {
	r, err := a.contextFor(c)
	if err != nil {
		a.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, a.view(r))
}

func (a *API) patchContext(c *gin.Context) {
	r, err := a.contextFor(c)
	if err != nil {
		a.fail(c, err)
		return
	}
	var req patchContextRequest
	if err := a.decodeJSON(c, &req); err != nil {
		a.fail(c, err)
		return
	}
	ttl, err := a.ttl(req.TTLSeconds)
	if err != nil {
		a.fail(c, err)
		return
	}
	r, ok, err := a.contexts.extend(r.ID, ttl)
	if !ok {
		a.fail(c, fmt.Errorf("%w: context %s", ErrNotFound, c.Param("id")))
		return
	}
	if err != nil {
		a.log.Warn("server: re-pinning an extended context", "id", r.ID, "err", err)
	}
	a.publish(c.Request.Context(), a.heldKeys(r.Keys)...)
	c.JSON(http.StatusOK, a.view(r))
}

func (a *API) deleteContext(c *gin.Context) {
	r, err := a.contextFor(c)
	if err != nil {
		a.fail(c, err)
		return
	}
	if _, ok := a.contexts.remove(r.ID); !ok {
		a.fail(c, fmt.Errorf("%w: context %s", ErrNotFound, r.ID))
		return
	}
	a.publish(c.Request.Context(), a.heldKeys(r.Keys)...)
	c.JSON(http.StatusOK, gin.H{"id": r.ID, "deleted": true})
}

// Page sizes of GET /v1/contexts.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

func (a *API) listContexts(c *gin.Context) {
	p := principal(c)
	ns := c.Query("namespace")
	if ns != "" {
		if err := block.ValidateNamespace(ns); err != nil {
			a.fail(c, err)
			return
		}
	}
	limit := defaultListLimit
	if s := c.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxListLimit {
			a.fail(c, fmt.Errorf("%w: limit %q: want 1 to %d", ErrBadRequest, s, maxListLimit))
			return
		}
		limit = n
	}
	cursor := c.Query("cursor")
	if cursor != "" {
		if err := validContextID(cursor); err != nil {
			a.fail(c, fmt.Errorf("%w: cursor: %v", ErrBadRequest, err))
			return
		}
	}
	recs, next := a.contexts.list(func(rns string) bool {
		return p.CanAccess(rns) && (ns == "" || rns == ns)
	}, cursor, limit)
	res := listContextsResponse{Contexts: make([]contextSummary, len(recs)), NextCursor: next}
	for i, r := range recs {
		res.Contexts[i] = contextSummary{ID: r.ID, Namespace: r.Namespace, Name: r.Name, Blocks: len(r.Keys), CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}
	}
	c.JSON(http.StatusOK, res)
}

// statsResponse is the body of GET /v1/stats.
type statsResponse struct {
	Store         tier.HierarchyStats `json:"store"`
	Contexts      int                 `json:"contexts"`
	InflightBytes int64               `json:"inflight_bytes"`
	UptimeSeconds float64             `json:"uptime_seconds"`
	// Node, Version and Requests are what the console's overview shows.
	Node     string `json:"node"`
	Version  string `json:"version"`
	Requests int64  `json:"requests"`
}

type tiersResponse struct {
	Tiers []tierInfo `json:"tiers"`
}

type tierInfo struct {
	Level int `json:"level"`
	tier.Stats
}

func requireAdmin(p auth.Principal) error {
	if !p.IsAdmin() {
		return fmt.Errorf("%w: tenant %q: node-wide statistics need the admin role", auth.ErrForbidden, p.Tenant)
	}
	return nil
}

func (a *API) getStats(c *gin.Context) {
	if err := requireAdmin(principal(c)); err != nil {
		a.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, a.stats())
}

func (a *API) stats() statsResponse {
	return statsResponse{
		Store: a.store.Stats(), Contexts: a.contexts.len(), InflightBytes: a.budget.Budget().InUse(),
		UptimeSeconds: a.opts.Now().Sub(a.started).Seconds(),
		Node:          a.opts.NodeName, Version: a.opts.Version, Requests: a.metrics.requests.Load(),
	}
}

func (a *API) getTiers(c *gin.Context) {
	if err := requireAdmin(principal(c)); err != nil {
		a.fail(c, err)
		return
	}
	st := a.store.Stats()
	res := tiersResponse{Tiers: make([]tierInfo, len(st.Tiers))}
	for i, t := range st.Tiers {
		res.Tiers[i] = tierInfo{Level: i, Stats: t}
	}
	c.JSON(http.StatusOK, res)
}
