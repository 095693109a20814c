package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/block/frame"
	"github.com/yuebing/yuebing/cluster"
	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/tier"
)

// keysRequest names blocks of one namespace: chained keys, or the raw names
// of opaque-keyed objects (exactly one of the two). In order, they are a
// chain for prefix matching.
type keysRequest struct {
	Namespace string      `json:"namespace"`
	Keys      []block.Key `json:"keys,omitempty"`
	Names     []string    `json:"names,omitempty"`
}

// targets validates the request against the batch limit and p's access.
func (r *keysRequest) targets(p auth.Principal, maxKeys int) ([]target, error) {
	if err := block.ValidateNamespace(r.Namespace); err != nil {
		return nil, err
	}
	if err := p.Authorize(r.Namespace); err != nil {
		return nil, err
	}
	switch {
	case len(r.Keys) > 0 && len(r.Names) > 0:
		return nil, fmt.Errorf("%w: give keys or names, not both", ErrBadRequest)
	case len(r.Keys) == 0 && len(r.Names) == 0:
		return nil, fmt.Errorf("%w: give at least one key or name", ErrBadRequest)
	case len(r.Keys)+len(r.Names) > maxKeys:
		return nil, fmt.Errorf("%w: %d keys in one request, limits.max_batch_keys is %d", ErrTooLarge, len(r.Keys)+len(r.Names), maxKeys)
	}
	ts := make([]target, 0, len(r.Keys)+len(r.Names))
	for _, k := range r.Keys {
		ts = append(ts, target{key: k, ns: r.Namespace})
	}
	for i, n := range r.Names {
		if err := validateObjectName(n); err != nil {
			return nil, fmt.Errorf("names[%d]: %w", i, err)
		}
		ts = append(ts, target{key: block.OpaqueKey(r.Namespace, []byte(n)), ns: r.Namespace, object: true, name: n})
	}
	return ts, nil
}

// existsResponse answers a batch exists / prefix match.
type existsResponse struct {
	// PrefixLen is how many leading keys are stored.
	PrefixLen int `json:"prefix_len"`
	// PrefixTiers counts, per tier name, the blocks of the prefix whose
	// fastest copy is there.
	PrefixTiers map[string]int `json:"prefix_tiers"`
	// Exists says, key by key, whether the block is stored.
	Exists []bool `json:"exists"`
	// Tiers names, key by key, the fastest tier holding the block ("" when
	// not stored).
	Tiers []string `json:"tiers"`
}

// keyTargets decodes a batch request naming keys and resolves the blocks
// the caller may see; on an error it has answered and returns false.
func (a *API) keyTargets(c *gin.Context, p auth.Principal) ([]target, bool) {
	var req keysRequest
	if err := a.decodeJSON(c, &req); err != nil {
		a.fail(c, err)
		return nil, false
	}
	ts, err := req.targets(p, a.limits.MaxBatchKeys)
	if err != nil {
		a.fail(c, err)
		return nil, false
	}
	return ts, true
}

func (a *API) batchExists(c *gin.Context) {
	p := principal(c)
	ts, ok := a.keyTargets(c, p)
	if !ok {
		return
	}
	res := existsResponse{PrefixTiers: map[string]int{}, Exists: make([]bool, len(ts)), Tiers: make([]string, len(ts))}
	for _, t := range a.store.Tiers() {
		res.PrefixTiers[t.Name()] = 0
	}
	remote := a.existsRemote(c.Request.Context(), p, ts)
	prefix := true
	for i, t := range ts {
		if remote[i] {
			res.Exists[i], res.Tiers[i] = true, "remote"
		} else if _, level, err := a.visible(p, t); err == nil {
			res.Exists[i], res.Tiers[i] = true, a.tierName(level)
		} else {
			prefix = false
			continue
		}
		if prefix {
			res.PrefixLen++
			res.PrefixTiers[res.Tiers[i]]++
		}
	}
	c.JSON(http.StatusOK, res)
}

// existsRemote says which of ts, not held by this node, another node of
// the cluster holds and p may see: what a HEAD of each would find. The
// blocks are read as a multi-get reads them (one round trip to the leader,
// one to each holder) because only the block's record says whose it is;
// a holder that does not answer in batchFetchWait leaves its blocks
// missing, as a HEAD would.
func (a *API) existsRemote(ctx context.Context, p auth.Principal, ts []target) []bool {
	out := make([]bool, len(ts))
	if a.opts.Cluster == nil {
		return out
	}
	for i, r := range a.prefetch(ctx, ts) {
		if r == nil {
			continue
		}
		if h := a.visibleRemote(p, ts[i], r); h != nil {
			out[i] = true
			h.Release()
		}
	}
	return out
}

// batchGet answers a multi-get with a framed body: one frame per requested
// key, in order, missing ones flagged. Every block is pinned before the
// first byte is sent, so the response has a length and every frame its
// checksum.
func (a *API) batchGet(c *gin.Context) {
	p := principal(c)
	ts, ok := a.keyTargets(c, p)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	// Blocks below the top tier come back as heap copies: charge them to
	// the budget up front.
	var heapBytes int64
	for _, t := range ts {
		if e, ok := a.store.Lookup(t.key); ok && e.Tiers.Top() > 0 {
			heapBytes += int64(e.Size)
		}
	}
	if heapBytes > int64(a.limits.MaxBatchBytes) {
		a.fail(c, fmt.Errorf("%w: the blocks add up to over %d bytes (limits.max_batch_bytes)", ErrTooLarge, a.limits.MaxBatchBytes))
		return
	}
	release, err := a.reserve(ctx, heapBytes)
	if err != nil {
		a.fail(c, err)
		return
	}
	defer release()
	frames := make([]frame.Header, len(ts))
	handles := make([]*tier.Handle, len(ts))
	defer func() {
		for _, h := range handles {
			if h != nil {
				h.Release()
			}
		}
	}()
	remote := a.prefetch(ctx, ts)
	defer func() {
		for _, r := range remote {
			if r != nil {
				r.Handle.Release()
			}
		}
	}()
	total := int64(len(frame.Magic))
	var data int64
	for i, t := range ts {
		frames[i].Key = t.key
		frames[i].Flags = frame.FlagMissing
		var h *tier.Handle
		tierBits := uint32(frame.TierRemote)
		if r := remote[i]; r != nil {
			remote[i] = nil
			a.store.Missed() // of this node's store, as Fetch counts it
			h = a.visibleRemote(p, t, r)
		} else {
			h, tierBits, err = a.batchBlock(ctx, p, t)
		}
		switch {
		case err != nil:
			a.fail(c, err)
			return
		case h == nil:
			total += frame.HeaderSize
			continue
		}
		handles[i] = h
		data += int64(h.Len())
		if data > int64(a.limits.MaxBatchBytes) {
			a.fail(c, fmt.Errorf("%w: the blocks add up to over %d bytes (limits.max_batch_bytes)", ErrTooLarge, a.limits.MaxBatchBytes))
			return
		}
		frames[i] = frame.Header{Key: t.key, Flags: frame.FlagCRC | tierBits<<frame.TierShift, CRC: h.Checksum(), Length: uint64(h.Len())}
		total += frame.HeaderSize + int64(h.Len())
	}
	hdr := c.Writer.Header()
	hdr.Set("Content-Type", FramesContentType)
	hdr.Set("Content-Length", strconv.FormatInt(total, 10))
	c.Status(http.StatusOK)
	w := c.Writer
	if _, err := w.WriteString(frame.Magic); err != nil {
		return
	}
	var b [frame.HeaderSize]byte
	for i, f := range frames {
		f.Encode(&b)
		if _, err := w.Write(b[:]); err != nil {
			return // the client went away
		}
		if h := handles[i]; h != nil {
			if _, err := w.Write(h.Bytes()); err != nil {
				return
			}
			h.Release()
			handles[i] = nil
		}
	}
}

// batchBlock pins one block of a multi-get and says which tier it came
// from (frame.TierRemote: another node). A nil handle with a nil error is a
// missing frame: not stored, not visible to p, or not fetched in time.
func (a *API) batchBlock(ctx context.Context, p auth.Principal, t target) (*tier.Handle, uint32, error) {
	if a.opts.Cluster != nil && !a.store.Contains(t.key) {
		return a.fetchForBatch(ctx, p, t), frame.TierRemote, nil
	}
	if _, _, err := a.visible(p, t); err != nil {
		a.store.Missed()
		return nil, 0, nil
	}
	h, level, err := a.store.Get(ctx, t.key) // counts the hit or miss
	switch {
	case errors.Is(err, tier.ErrNotFound), errors.Is(err, tier.ErrCorrupt):
		return nil, 0, nil
	case err != nil:
		return nil, 0, err
	}
	return h, uint32(level), nil
}

// prefetch reads the blocks of a multi-get that this node does not hold
// from the nodes that do, all at once: one round trip to the leader and one
// to each holder (docs/cluster.md). remote[i] is nil for a block held here
// or not read; batchBlock then serves or misses it as for one block.
func (a *API) prefetch(ctx context.Context, ts []target) []*cluster.Remote {
	remote := make([]*cluster.Remote, len(ts))
	if a.opts.Cluster == nil {
		return remote
	}
	var keys []block.Key
	var idx []int
	for i, t := range ts {
		if !a.store.Contains(t.key) {
			keys = append(keys, t.key)
			idx = append(idx, i)
		}
	}
	if len(keys) == 0 {
		return remote
	}
	ctx, cancel := context.WithTimeout(ctx, batchFetchWait)
	defer cancel()
	got, _ := a.opts.Cluster.ReadMany(ctx, keys)
	for j, i := range idx {
		remote[i] = got[j]
	}
	return remote
}

// visibleRemote returns r's handle if p may see the block, else releases
// it and returns nil (a missing frame).
func (a *API) visibleRemote(p auth.Principal, t target, r *cluster.Remote) *tier.Handle {
	if needsCheck(p, t) && !canSee(p, t, r.Origin.Info.Meta) {
		r.Handle.Release()
		return nil
	}
	return r.Handle
}

// batchFetchWait bounds how long a multi-get waits for one block from
// another node. Fetched blocks count against the cluster's in-flight fetch
// budget until the answer is written, so two large batches could each hold
// part of it while waiting for the rest; past this wait the block is
// reported missing, as a cache may, and the batch goes on.
const batchFetchWait = 5 * time.Second

// fetchForBatch reads a block this node does not hold from another node
// for a multi-get, or returns nil: not found anywhere, not visible to p,
// or not fetched in time.
func (a *API) fetchForBatch(ctx context.Context, p auth.Principal, t target) *tier.Handle {
	ctx, cancel := context.WithTimeout(ctx, batchFetchWait)
	defer cancel()
	h, _, _, err := a.fetchVisible(ctx, p, t)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			a.log.Debug("server: multi-get: fetching from another node", "key", t.key, "err", err)
		}
		return nil
	}
	return h
}

// batchPutItem is the outcome of one frame of a multi-put.
type batchPutItem struct {
	Key     block.Key    `json:"key"`
	Status  string       `json:"status"` // created, exists or error
	Tier    string       `json:"tier,omitempty"`
	Size    int64        `json:"size"`
	Error   *errorDetail `json:"error,omitempty"`
	created bool
}

type batchPutResponse struct {
	Results []batchPutItem `json:"results"`
}

// batchPutError is the answer to a multi-put whose body broke off: the
// error, and what the frames before it did (they are stored).
type batchPutError struct {
	Error   errorDetail    `json:"error"`
	Results []batchPutItem `json:"results"`
}

// batchPut stores every frame of a framed body, in order, each as its own
// put: a frame that fails (a checksum mismatch, a conflict) stores nothing
// and the next is still tried. A malformed body stops the request at that
// frame; frames before it stay stored and are listed in the answer.
func (a *API) batchPut(c *gin.Context) {
	ns, err := namespaceHeader(c, true)
	if err != nil {
		a.fail(c, err)
		return
	}
	p := principal(c)
	if err := p.Authorize(ns); err != nil {
		a.fail(c, err)
		return
	}
	// Every frame may carry its parent's key after its header.
	maxBody := int64(len(frame.Magic)) + int64(a.limits.MaxBatchKeys)*(frame.HeaderSize+block.KeySize) + int64(a.limits.MaxBatchBytes)
	if c.Request.ContentLength > maxBody {
		a.fail(c, fmt.Errorf("%w: body of %d bytes, at most %d with limits.max_batch_keys and limits.max_batch_bytes", ErrTooLarge, c.Request.ContentLength, maxBody))
		return
	}
	body := http.MaxBytesReader(c.Writer, c.Request.Body, maxBody)
	ctx := c.Request.Context()
	fr := newFrameReader(body, frame.PutFlags, int64(a.limits.MaxBlockSize))
	meta, err := encodeMeta(blockMeta{Namespace: ns})
	if err != nil {
		a.fail(c, err)
		return
	}
	// Frames carry no retention of their own: the header's class is every
	// frame's, and each pinned frame is charged to the quota on its own.
	ret, err := a.retentionHeader(c)
	if err != nil {
		a.fail(c, err)
		return
	}
	parent, hasParent, err := parentHeader(c.Request.Header)
	if err != nil {
		a.fail(c, err)
		return
	}
	chained, err := chainHeader(c.Request.Header)
	if err != nil {
		a.fail(c, err)
		return
	}
	hasParent = hasParent && chained
	var (
		results []batchPutItem
		total   int64
	)
	stop := func(err error) {
		status, code := apiError(err)
		c.AbortWithStatusJSON(status, batchPutError{Error: errorDetail{Code: code, Message: err.Error()}, Results: results})
	}
	for {
		h, err := fr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				err = fmt.Errorf("%w: body over %d bytes", ErrTooLarge, maxBody)
			}
			stop(err)
			return
		}
		if len(results) == a.limits.MaxBatchKeys {
			stop(fmt.Errorf("%w: more than %d frames (limits.max_batch_keys)", ErrTooLarge, a.limits.MaxBatchKeys))
			return
		}
		if total += int64(h.Length); total > int64(a.limits.MaxBatchBytes) {
			stop(fmt.Errorf("%w: frames add up to over %d bytes (limits.max_batch_bytes)", ErrTooLarge, a.limits.MaxBatchBytes))
			return
		}
		size := int64(h.Length)
		t := target{key: h.Key, ns: ns}
		opts := tier.PutOptions{Checksum: h.CRC, HasChecksum: h.HasCRC(), Meta: meta, PinnedUntil: a.contexts.pinFor(h.Key, ns),
			Retention: ret.class, RetainUntil: ret.until, Parent: parent, HasParent: hasParent}
		if h.HasParent() {
			// The frame's own parent wins over the chain's: a batch may mix
			// several chains (the adapter's saves do).
			opts.Parent, opts.HasParent = h.Parent, true
		}
		if chained {
			parent, hasParent = h.Key, true
		}
		release, err := a.reserve(ctx, size)
		if err != nil {
			stop(err)
			return
		}
		res, err := a.storeRetained(ctx, t, size, fr.Data(), opts, ret)
		release()
		item := batchPutItem{Key: h.Key, Size: size, Tier: res.Tier, Status: "exists", created: res.Created}
		if res.Created {
			item.Status = "created"
		}
		if err != nil {
			if errors.Is(err, ErrBadRequest) || errors.Is(err, ErrTooLarge) || ctx.Err() != nil {
				// The body itself is broken or gone: no later frame can be read.
				stop(err)
				return
			}
			_, code := apiError(err)
			item.Status, item.Tier = "error", ""
			item.Error = &errorDetail{Code: code, Message: err.Error()}
		}
		results = append(results, item)
	}
	if results == nil {
		results = []batchPutItem{}
	}
	var stored []block.Key
	for _, r := range results {
		if r.Status != "error" {
			stored = append(stored, r.Key)
		}
	}
	a.publish(ctx, stored...)
	c.JSON(http.StatusOK, batchPutResponse{Results: results})
}

type batchDeleteItem struct {
	Key     block.Key `json:"key"`
	Deleted bool      `json:"deleted"`
}

type batchDeleteResponse struct {
	Deleted int               `json:"deleted"`
	Results []batchDeleteItem `json:"results"`
}

// batchDelete deletes every listed block the caller may see; the others
// are reported as not deleted.
func (a *API) batchDelete(c *gin.Context) {
	p := principal(c)
	ts, ok := a.keyTargets(c, p)
	if !ok {
		return
	}
	res := batchDeleteResponse{Results: make([]batchDeleteItem, len(ts))}
	for i, t := range ts {
		err := a.deleteTarget(c.Request.Context(), p, t)
		switch {
		case err == nil:
			res.Deleted++
		case errors.Is(err, ErrNotFound):
		default:
			a.fail(c, err)
			return
		}
		res.Results[i] = batchDeleteItem{Key: t.key, Deleted: err == nil}
	}
	c.JSON(http.StatusOK, res)
}
