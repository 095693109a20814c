package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/block/frame"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/server/staging"
	"github.com/yuebing/yuebing/tier"
)

// The /v1/shm endpoints move block bytes through a client's shared-memory
// staging segment (package staging) instead of the HTTP body: a client on
// the same host asks for a session on the node's unix socket, maps the
// segment it receives, and names byte ranges of it here. A get copies each
// block from the store into the segment, a put stores each range of the
// segment as a block: one copy on the server's side, one on the client's,
// nothing on a socket.

// shmOwner is the identity a staging session is bound to: only requests of
// the principal that opened a session may use it.
func shmOwner(p auth.Principal) string { return p.Role + ":" + p.Tenant }

// shmItem is one block and its range of the segment.
type shmItem struct {
	// Key or Name (an object of the request's namespace) names the block.
	Key  *block.Key `json:"key,omitempty"`
	Name string     `json:"name,omitempty"`
	// Region, when set, names a buffer of the client's own that the
	// session registered (staging.Session.Region): Offset and Length are a
	// range of it instead of the segment, and the block moves straight
	// between it and the store.
	Region uint32 `json:"region,omitempty"`
	// Offset and Length are the range of the segment: a get copies the
	// block into it (the block must fit), a put stores it.
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
	// From, on a get, makes it a ranged read: exactly Length bytes of the
	// block starting at From.
	From *int64 `json:"from,omitempty"`
	// Parent, on a put, is the key (64 hex characters) of the block before
	// this one in its prefix chain, for SSD admission (HeaderParent). A
	// string rather than a block.Key, so a bad one is refused naming the
	// item rather than as undecodable JSON.
	Parent string `json:"parent,omitempty"`

	// parent is Parent parsed by shmTargets; hasParent when given.
	parent    block.Key
	hasParent bool
}

type shmRequest struct {
	Namespace string    `json:"namespace"`
	Items     []shmItem `json:"items"`
	// Replicas, on a put, is each block's replica count in a cluster.
	Replicas int `json:"replicas,omitempty"`
}

// shmResult is the outcome of one item, in order.
type shmResult struct {
	Key block.Key `json:"key"`
	// Status is ok (get), created or exists (put), missing (get of a block
	// not stored or not visible) or error.
	Status string `json:"status"`
	// Size is the bytes copied (get) or the block's size (put).
	Size int64 `json:"size"`
	// Crc32c is the whole block's checksum, on a get.
	Crc32c string       `json:"crc32c,omitempty"`
	Tier   string       `json:"tier,omitempty"`
	Error  *errorDetail `json:"error,omitempty"`
}

type shmResponse struct {
	Results []shmResult `json:"results"`
}

func (a *API) shmInfo(c *gin.Context) {
	if a.opts.Staging == nil {
		a.fail(c, fmt.Errorf("%w: shared memory is disabled on this node (shm.listen)", ErrNotFound))
		return
	}
	c.JSON(http.StatusOK, gin.H{"socket": a.opts.Staging.Addr()})
}

// shmTargets validates a request for p and resolves its blocks.
func (a *API) shmTargets(p auth.Principal, req *shmRequest) ([]target, error) {
	if err := block.ValidateNamespace(req.Namespace); err != nil {
		return nil, err
	}
	if err := p.Authorize(req.Namespace); err != nil {
		return nil, err
	}
	switch {
	case len(req.Items) == 0:
		return nil, fmt.Errorf("%w: give at least one item", ErrBadRequest)
	case len(req.Items) > a.limits.MaxBatchKeys:
		return nil, fmt.Errorf("%w: %d items in one request, limits.max_batch_keys is %d", ErrTooLarge, len(req.Items), a.limits.MaxBatchKeys)
	case req.Replicas < 0 || req.Replicas > 255:
		return nil, fmt.Errorf("%w: replicas %d: want 1 to 255", ErrBadRequest, req.Replicas)
	case req.Replicas > 1 && a.opts.Cluster == nil:
		return nil, fmt.Errorf("%w: replicas %d on a node that runs alone", ErrBadRequest, req.Replicas)
	}
	ts := make([]target, len(req.Items))
	for i := range req.Items {
		it := &req.Items[i]
		if it.Parent != "" {
			k, err := block.ParseKey(it.Parent)
			if err != nil {
				// The whole request is refused before any item is stored.
				return nil, fmt.Errorf("%w: items[%d].parent: %v", ErrBadRequest, i, err)
			}
			it.parent, it.hasParent = k, true
		}
		switch {
		case it.Key != nil && it.Name != "":
			return nil, fmt.Errorf("%w: items[%d]: give key or name, not both", ErrBadRequest, i)
		case it.Key != nil:
			ts[i] = target{key: *it.Key, ns: req.Namespace}
		default:
			if err := validateObjectName(it.Name); err != nil {
				return nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			ts[i] = target{key: block.OpaqueKey(req.Namespace, []byte(it.Name)), ns: req.Namespace, object: true, name: it.Name}
		}
	}
	return ts, nil
}

// shmPrologue decodes an HTTP request, checks it and acquires the
// session; on an error it has answered and returns ok false. The caller
// releases the session.
func (a *API) shmPrologue(c *gin.Context) (req shmRequest, ts []target, sess *staging.Session, release func(), ok bool) {
	if a.opts.Staging == nil {
		a.fail(c, fmt.Errorf("%w: shared memory is disabled on this node (shm.listen)", ErrNotFound))
		return
	}
	p := principal(c)
	if err := a.decodeJSON(c, &req); err != nil {
		a.fail(c, err)
		return
	}
	ts, err := a.shmTargets(p, &req)
	if err != nil {
		a.fail(c, err)
		return
	}
	sess, release, err = a.opts.Staging.Acquire(c.Param("session"), shmOwner(p))
	if err != nil {
		a.fail(c, fmt.Errorf("%w: %w", ErrNotFound, err))
		return
	}
	return req, ts, sess, release, true
}

func (a *API) shmGet(c *gin.Context) {
	req, ts, sess, release, ok := a.shmPrologue(c)
	if !ok {
		return
	}
	defer release()
	c.JSON(http.StatusOK, a.shmGetItems(c.Request.Context(), principal(c), req, ts, sess))
}

func (a *API) shmPut(c *gin.Context) {
	req, ts, sess, release, ok := a.shmPrologue(c)
	if !ok {
		return
	}
	defer release()
	c.JSON(http.StatusOK, a.shmPutItems(c.Request.Context(), req, ts, sess))
}

// shmOp is a request on a staging session's own socket: the same as the
// HTTP endpoints' body, plus which of them.
type shmOp struct {
	Op string `json:"op"` // get or put
	shmRequest
}

// ServeShm answers one request line read from a staging session's socket
// (staging.Options.Handle): the same work as POST /v1/shm/{session}/get or
// /put, for the principal that opened the session, without an HTTP round
// trip. It returns the answer line.
func (a *API) ServeShm(ctx context.Context, sess *staging.Session, line []byte) []byte {
	defer func(start time.Time) { a.shmLatency.Observe(time.Since(start)) }(time.Now())
	ctx, cancel := context.WithTimeout(ctx, a.limits.RequestTimeout)
	defer cancel()
	var out any
	var req shmOp
	err := decodeJSONBody(bytes.NewReader(line), &req)
	p, _ := sess.Value.(auth.Principal)
	var ts []target
	if err == nil {
		ts, err = a.shmTargets(p, &req.shmRequest)
	}
	switch {
	case err != nil:
	case req.Op == "get":
		out = a.shmGetItems(ctx, p, req.shmRequest, ts, sess)
	case req.Op == "put":
		out = a.shmPutItems(ctx, req.shmRequest, ts, sess)
	default:
		err = fmt.Errorf("%w: op %q: want get or put", ErrBadRequest, req.Op)
	}
	if err != nil {
		_, code := apiError(err)
		out = errorBody{Error: errorDetail{Code: code, Message: err.Error()}}
	}
	b, _ := json.Marshal(out)
	return b
}

// span checks an item's range against the segment, or the registered
// region it names, and returns that range.
func span(it shmItem, sess *staging.Session) ([]byte, error) {
	seg, what := sess.Bytes(), "segment"
	if it.Region != 0 {
		var ok bool
		if seg, ok = sess.Region(it.Region); !ok {
			return nil, fmt.Errorf("%w: no region %d is registered in this session", ErrBadRequest, it.Region)
		}
		what = "region"
	}
	if it.Offset < 0 || it.Length < 0 || it.Offset > int64(len(seg)) || it.Length > int64(len(seg))-it.Offset {
		return nil, fmt.Errorf("%w: range [%d, +%d) is outside the %d-byte %s", ErrBadRequest, it.Offset, it.Length, len(seg), what)
	}
	return seg[it.Offset : it.Offset+it.Length], nil
}

func itemError(err error) *errorDetail {
	_, code := apiError(err)
	return &errorDetail{Code: code, Message: err.Error()}
}

// shmGetItems copies blocks into the session's memory, each where its item
// says; one item failing does not stop the others.
func (a *API) shmGetItems(ctx context.Context, p auth.Principal, req shmRequest, ts []target, sess *staging.Session) shmResponse {
	res := shmResponse{Results: make([]shmResult, len(ts))}
	shmEach(req.Items, nil, func(i int) {
		t := ts[i]
		r := &res.Results[i]
		r.Key = t.key
		dst, err := span(req.Items[i], sess)
		if err != nil {
			r.Status, r.Error = "error", itemError(err)
			return
		}
		n, sum, level, err := a.shmCopyOut(ctx, p, t, req.Items[i], dst)
		switch {
		case errors.Is(err, errMissing):
			r.Status = "missing"
		case err != nil:
			r.Status, r.Error = "error", itemError(err)
		default:
			r.Status, r.Size, r.Crc32c = "ok", n, fmt.Sprintf("%08x", sum)
			if level == tier.RemoteLevel {
				r.Tier = "remote"
			} else {
				r.Tier = a.tierName(level)
			}
		}
	})
	return res
}

// shmParallelMin is the fewest bytes a request's items must move together
// for shmEach to spread them over cores. Measured on a 2-core VM, 16
// values of 1 MiB load in two thirds of the time spread, but 4 values of
// 256 KiB or 1 MiB took longer: waking a second thread costs tens of
// microseconds there, and a copy of a few MiB is memory-bound on one core
// already.
const shmParallelMin = 8 << 20

// shmEach runs f for each item's index, on up to GOMAXPROCS goroutines
// when the items move shmParallelMin bytes or more between them: a
// connector loads all the blocks of a prefix in one request, and one
// core's memmove is a fraction of what the memory carries. Each f writes
// only its own result. independent, asked only of a batch large enough to
// spread, returning false (a put batch whose items name parents, or a key
// twice) keeps them in order, one at a time: SSD admission reads a
// parent's state, and of two puts of one key the first must win; nil means
// the items are always independent.
func shmEach(items []shmItem, independent func() bool, f func(i int)) {
	var total int64
	for i := range items {
		total += max(items[i].Length, 0)
	}
	workers := min(runtime.GOMAXPROCS(0), len(items))
	if workers < 2 || total < shmParallelMin || independent != nil && !independent() {
		for i := range items {
			f(i)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1) - 1); i < len(items); i = int(next.Add(1) - 1) {
			f(i)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work() // the request's own goroutine takes items too
	wg.Wait()
}

// shmIndependent reports whether a put batch's items may be stored in any
// order: none names a parent and no key appears twice.
func shmIndependent(req shmRequest, ts []target) bool {
	seen := make(map[block.Key]struct{}, len(ts))
	for i, t := range ts {
		if req.Items[i].hasParent {
			return false
		}
		if _, dup := seen[t.key]; dup {
			return false
		}
		seen[t.key] = struct{}{}
	}
	return true
}

// errMissing marks a block that is not stored or not visible.
var errMissing = errors.New("server: missing")

// shmCopyOut pins the block and copies it (or the item's range of it) into
// dst; it returns the bytes copied, the whole block's checksum and the
// tier it was read from.
func (a *API) shmCopyOut(ctx context.Context, p auth.Principal, t target, it shmItem, dst []byte) (int64, uint32, int, error) {
	if e, ok := a.store.Lookup(t.key); ok && e.Tiers.Top() > 0 {
		// A block read from a lower tier is copied into the heap first.
		release, err := a.reserve(ctx, int64(e.Size))
		if err != nil {
			return 0, 0, 0, err
		}
		defer release()
	}
	h, level, err := a.batchBlock(ctx, p, t)
	if err != nil {
		return 0, 0, 0, err
	}
	if h == nil {
		return 0, 0, 0, errMissing
	}
	defer h.Release()
	lvl := int(level)
	if level == frame.TierRemote {
		lvl = tier.RemoteLevel
	}
	data := h.Bytes()
	if it.From != nil {
		from := *it.From
		if from < 0 || from > int64(len(data)) || it.Length > int64(len(data))-from {
			return 0, 0, 0, fmt.Errorf("%w: bytes [%d, +%d) of a %d-byte block", ErrRange, from, it.Length, len(data))
		}
		n, err := staging.Copy(dst, data[from:from+it.Length])
		return int64(n), h.Checksum(), lvl, err
	}
	if len(data) > len(dst) {
		return 0, 0, 0, fmt.Errorf("%w: the block has %d bytes, the buffer %d", ErrTooLarge, len(data), len(dst))
	}
	n, err := staging.Copy(dst, data)
	return int64(n), h.Checksum(), lvl, err
}

// shmPutItems stores ranges of the session's memory as blocks, each as its
// own put: one that fails stores nothing and the next is still tried.
func (a *API) shmPutItems(ctx context.Context, req shmRequest, ts []target, sess *staging.Session) shmResponse {
	res := shmResponse{Results: make([]shmResult, len(ts))}
	shmEach(req.Items, func() bool { return shmIndependent(req, ts) }, func(i int) {
		t := ts[i]
		r := &res.Results[i]
		r.Key = t.key
		src, err := span(req.Items[i], sess)
		if err == nil && req.Items[i].Length > int64(a.limits.MaxBlockSize) {
			err = fmt.Errorf("%w: block of %d bytes, limits.max_block_size is %d", ErrTooLarge, req.Items[i].Length, a.limits.MaxBlockSize)
		}
		var meta []byte
		if err == nil {
			meta, err = encodeMeta(t.meta())
		}
		if err != nil {
			r.Status, r.Error = "error", itemError(err)
			return
		}
		opts := tier.PutOptions{Meta: meta, PinnedUntil: a.contexts.pinFor(t.key, t.ns),
			Parent: req.Items[i].parent, HasParent: req.Items[i].hasParent}
		// The segment is the client's to change at any time: the store
		// copies it once, and the checksum is of that copy.
		put, err := a.storeBlock(ctx, t, int64(len(src)), &shmReader{b: src}, opts)
		if err != nil {
			r.Status, r.Error = "error", itemError(err)
			return
		}
		r.Size, r.Tier = put.Size, put.Tier
		r.Status = "exists"
		if put.Created {
			r.Status = "created"
		}
		if req.Replicas > 0 && a.opts.Cluster != nil {
			a.opts.Cluster.NoteReplicas(t.key, req.Replicas)
		}
	})
	return res
}

// shmReader reads the client's memory as bytes.Reader does, through
// staging.Copy.
type shmReader struct{ b []byte }

func (r *shmReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n, err := staging.Copy(p, r.b)
	r.b = r.b[n:]
	return n, err
}

type clearRequest struct {
	Namespace string `json:"namespace"`
	// Regex, when set, limits the clear to objects whose name it matches
	// anywhere (RE2 syntax): Mooncake's remove_by_regex. Blocks stored by
	// chained key have no name and are kept.
	Regex string `json:"regex,omitempty"`
}

// clearBudget bounds how many blocks one clear call visits, so a request
// on a huge store still ends within its timeout; "more" tells the client
// to call again.
const clearBudget = 1 << 20

// clearNamespace deletes every block recorded under a namespace the
// caller may use (Mooncake's remove_all, scoped to one namespace).
func (a *API) clearNamespace(c *gin.Context) {
	p := principal(c)
	var req clearRequest
	if err := a.decodeJSON(c, &req); err != nil {
		a.fail(c, err)
		return
	}
	if err := block.ValidateNamespace(req.Namespace); err != nil {
		a.fail(c, err)
		return
	}
	if err := p.Authorize(req.Namespace); err != nil {
		a.fail(c, err)
		return
	}
	var re *regexp.Regexp
	if req.Regex != "" {
		var err error
		if re, err = regexp.Compile(req.Regex); err != nil {
			a.fail(c, fmt.Errorf("%w: regex: %v", ErrBadRequest, err))
			return
		}
	}
	ctx := c.Request.Context()
	deleted, visited := 0, 0
	var cursor uint64
	for {
		var keys []block.Key
		cursor = a.store.Scan(cursor, 1024, func(k block.Key, _ index.Entry) bool {
			keys = append(keys, k)
			return true
		})
		visited += len(keys)
		for _, k := range keys {
			info, _, err := a.store.Stat(k)
			if err != nil {
				continue
			}
			m, ok := decodeMeta(info.Meta)
			if !ok || m.Namespace != req.Namespace || re != nil && (!m.HasName || !re.MatchString(m.Name)) {
				continue
			}
			if a.store.Delete(k) == nil {
				deleted++
			}
		}
		if cursor == 0 || ctx.Err() != nil || visited >= clearBudget {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		a.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"namespace": req.Namespace, "deleted": deleted, "more": cursor != 0})
}
