package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/tier"
)

// target is the block a request is about.
type target struct {
	key block.Key
	// ns is the namespace the request names: required to write, optional
	// to read a chained key (then it must match what is recorded).
	ns string
	// object is set for opaque keys: the block must be recorded under
	// exactly this namespace and name.
	object bool
	name   string
}

func (t target) meta() blockMeta {
	return blockMeta{Namespace: t.ns, Name: t.name, HasName: t.object}
}

// maxObjectName bounds an object's raw name; with the namespace it must
// also fit the block's metadata record.
const maxObjectName = 256

func blockTarget(c *gin.Context, nsRequired bool) (target, error) {
	key, err := block.ParseKey(c.Param("key"))
	if err != nil {
		return target{}, err
	}
	ns, err := namespaceHeader(c, nsRequired)
	return target{key: key, ns: ns}, err
}

func objectTarget(c *gin.Context) (target, error) {
	ns, err := namespaceHeader(c, true)
	if err != nil {
		return target{}, err
	}
	name := strings.TrimPrefix(c.Param("name"), "/")
	if err := validateObjectName(name); err != nil {
		return target{}, err
	}
	return target{key: block.OpaqueKey(ns, []byte(name)), ns: ns, object: true, name: name}, nil
}

func validateObjectName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty object name", ErrBadRequest)
	}
	if len(name) > maxObjectName {
		return fmt.Errorf("%w: object name of %d bytes, at most %d", ErrBadRequest, len(name), maxObjectName)
	}
	return nil
}

// visible returns the stored block's info if p may see it as t names it,
// and an error wrapping ErrNotFound otherwise: a block of another tenant
// looks exactly like a missing one, so existence does not leak.
func (a *API) visible(p auth.Principal, t target) (tier.BlockInfo, int, error) {
	info, level, err := a.store.Stat(t.key)
	if err != nil {
		return info, level, notFound(t)
	}
	if !canSee(p, t, info.Meta) {
		return tier.BlockInfo{}, -1, notFound(t)
	}
	return info, level, nil
}

// canSee reports whether p may read a block recorded with meta as t names
// it.
func canSee(p auth.Principal, t target, meta []byte) bool {
	m, ok := decodeMeta(meta)
	switch {
	case t.object:
		return ok && m.HasName && m.Namespace == t.ns && m.Name == t.name && p.CanAccess(m.Namespace)
	case !ok:
		// Stored by another front end: only an admin reading by key alone.
		return p.IsAdmin() && t.ns == ""
	default:
		return p.CanAccess(m.Namespace) && (t.ns == "" || t.ns == m.Namespace)
	}
}

func notFound(t target) error {
	if t.object {
		return fmt.Errorf("%w: object %q in namespace %q", ErrNotFound, t.name, t.ns)
	}
	return fmt.Errorf("%w: block %s", ErrNotFound, t.key)
}

// needsCheck reports whether a read must look at the block's recorded
// owner. An admin reading a chained key by key alone may read any block,
// which saves a metadata lookup on the hot path with authentication off.
func needsCheck(p auth.Principal, t target) bool { return !p.IsAdmin() || t.ns != "" || t.object }

func (a *API) putBlock(c *gin.Context) {
	t, err := blockTarget(c, true)
	if err != nil {
		a.fail(c, err)
		return
	}
	a.put(c, t)
}

func (a *API) putObject(c *gin.Context) {
	t, err := objectTarget(c)
	if err != nil {
		a.fail(c, err)
		return
	}
	a.put(c, t)
}

func (a *API) getBlock(c *gin.Context)  { a.readBlock(c, false, false) }
func (a *API) headBlock(c *gin.Context) { a.readBlock(c, false, true) }
func (a *API) getObject(c *gin.Context) { a.readBlock(c, true, false) }
func (a *API) headObject(c *gin.Context) {
	a.readBlock(c, true, true)
}

func (a *API) deleteBlock(c *gin.Context)  { a.remove(c, false) }
func (a *API) deleteObject(c *gin.Context) { a.remove(c, true) }

// putResponse is the body of a successful PUT.
type putResponse struct {
	Key     block.Key `json:"key"`
	Created bool      `json:"created"`
	Tier    string    `json:"tier"`
	Size    int64     `json:"size"`
}

// put stores the request body as t. The body is streamed into the tier
// (into the DRAM arena itself when the block lands there), never buffered
// whole by the API.
func (a *API) put(c *gin.Context, t target) {
	p := principal(c)
	if err := p.Authorize(t.ns); err != nil {
		a.fail(c, err)
		return
	}
	size, err := declaredSize(c.Request, int64(a.limits.MaxBlockSize))
	if err != nil {
		a.fail(c, err)
		return
	}
	replicas, err := a.replicasHeader(c)
	if err != nil {
		a.fail(c, err)
		return
	}
	ret, err := a.retentionHeader(c)
	if err != nil {
		a.fail(c, err)
		return
	}
	opts := tier.PutOptions{Retention: ret.class, RetainUntil: ret.until}
	if opts.Parent, opts.HasParent, err = parentHeader(c.Request.Header); err != nil {
		a.fail(c, err)
		return
	}
	if opts.Checksum, opts.HasChecksum, err = crcHeader(c.GetHeader(HeaderCRC)); err != nil {
		a.fail(c, err)
		return
	}
	if opts.Meta, err = encodeMeta(t.meta()); err != nil {
		a.fail(c, err)
		return
	}
	ctx := c.Request.Context()
	release, err := a.reserve(ctx, size)
	if err != nil {
		a.fail(c, err)
		return
	}
	defer release()
	opts.PinnedUntil = a.contexts.pinFor(t.key, t.ns)
	body := http.MaxBytesReader(c.Writer, c.Request.Body, size)
	res, err := a.storeRetained(ctx, t, size, body, opts, ret)
	if err != nil {
		a.fail(c, err)
		return
	}
	if replicas > 0 && a.opts.Cluster != nil {
		// The node's next report takes the count to the leader, which
		// places the extra replicas.
		a.opts.Cluster.NoteReplicas(t.key, replicas)
	}
	a.publish(ctx, t.key)
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	c.JSON(status, res)
}

// declaredSize is a PUT body's length: Content-Length, or X-Yuebing-Size
// for a body sent without one (chunked). A body of unknown size is refused
// with 411: the store reserves a block's room before reading it.
func declaredSize(r *http.Request, limit int64) (int64, error) {
	size := r.ContentLength
	if h := r.Header.Get(HeaderSize); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%w: %s %q is not a byte count", ErrBadRequest, HeaderSize, h)
		}
		if size >= 0 && size != n {
			return 0, fmt.Errorf("%w: %s %d disagrees with Content-Length %d", ErrBadRequest, HeaderSize, n, size)
		}
		size = n
	}
	if size < 0 {
		return 0, fmt.Errorf("%w: send Content-Length or %s with the body", ErrLengthRequired, HeaderSize)
	}
	if size > limit {
		return 0, fmt.Errorf("%w: block of %d bytes, limits.max_block_size is %d", ErrTooLarge, size, limit)
	}
	return size, nil
}

// crcHeader parses an optional X-Yuebing-Crc32c: 8 hex digits.
func crcHeader(h string) (uint32, bool, error) {
	if h == "" {
		return 0, false, nil
	}
	if len(h) != 8 {
		return 0, false, fmt.Errorf("%w: %s %q: want 8 hex digits", ErrBadRequest, HeaderCRC, h)
	}
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %s %q: want 8 hex digits", ErrBadRequest, HeaderCRC, h)
	}
	return uint32(v), true, nil
}

// storeBlock writes size bytes from r as t. A key already stored under the
// same namespace and name is not rewritten (Created false); one stored
// under another is a conflict, so a put is never acknowledged for bytes
// that are someone else's.
func (a *API) storeBlock(ctx context.Context, t target, size int64, r io.Reader, opts tier.PutOptions) (putResponse, error) {
	res := putResponse{Key: t.key, Size: size}
	// A block found to exist may be evicted before its record is read; the
	// put then tries again. Twice is plenty: it takes an eviction each time.
	for range 3 {
		w, err := a.store.Create(ctx, t.key, size, opts)
		if errors.Is(err, tier.ErrExists) {
			res.Tier, err = a.existing(t)
			if errors.Is(err, tier.ErrNotFound) {
				continue
			}
			return res, err
		}
		if err != nil {
			return res, err
		}
		n, err := w.ReadFrom(r)
		if err != nil {
			w.Abort()
			return res, bodyError(err, size)
		}
		if n != size {
			w.Abort()
			return res, fmt.Errorf("%w: body has %d bytes, declared %d", ErrBadRequest, n, size)
		}
		if err := w.Commit(ctx); err != nil {
			if errors.Is(err, tier.ErrExists) {
				// Another put of the same key won; the body was read.
				res.Tier, err = a.existing(t)
				if errors.Is(err, tier.ErrNotFound) {
					err = fmt.Errorf("%w: the block was replaced and evicted during the put; retry", ErrConflict)
				}
				return res, err
			}
			return res, err
		}
		res.Created = true
		if e, ok := a.store.Lookup(t.key); ok {
			res.Tier = a.tierName(e.Tiers.Top())
		}
		return res, nil
	}
	return res, fmt.Errorf("%w: the block kept being evicted during the put; retry", ErrConflict)
}

// storeRetained is storeBlock for a put that names a retention class: a
// hard pin is charged to the namespace's quota first and given back if
// the put fails, so a refused put stores nothing; a block already stored
// takes the class (how a put releases or re-pins).
func (a *API) storeRetained(ctx context.Context, t target, size int64, r io.Reader, opts tier.PutOptions, ret retentionRequest) (putResponse, error) {
	undo, err := a.chargePin(t, size, ret)
	if err != nil {
		return putResponse{Key: t.key, Size: size}, err
	}
	res, err := a.storeBlock(ctx, t, size, r, opts)
	if err == nil && !res.Created {
		err = a.applyRetention(t, ret)
	}
	if err != nil {
		undo()
		return res, err
	}
	a.pins.settle(t.key)
	return res, nil
}

// existing checks that the stored block with t's key is recorded as t and
// returns the tier holding it.
func (a *API) existing(t target) (string, error) {
	info, level, err := a.store.Stat(t.key)
	if err != nil {
		return "", err
	}
	if m, ok := decodeMeta(info.Meta); !ok || m != t.meta() {
		return "", fmt.Errorf("%w: key %s is already stored under another namespace or name", ErrConflict, t.key)
	}
	return a.tierName(level), nil
}

func bodyError(err error, size int64) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe), errors.Is(err, tier.ErrSize):
		return fmt.Errorf("%w: body is longer than the declared %d bytes", ErrBadRequest, size)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: body ended before the declared %d bytes", ErrBadRequest, size)
	case errors.Is(err, ErrBadRequest), errors.Is(err, ErrTooLarge):
		return err
	default:
		return fmt.Errorf("%w: reading the body: %v", ErrBadRequest, err)
	}
}

// pathTarget names the block or object of a GET, HEAD or DELETE path.
func pathTarget(c *gin.Context, object bool) (target, error) {
	if object {
		return objectTarget(c)
	}
	return blockTarget(c, false)
}

// readBlock answers GET and HEAD of a block or object.
func (a *API) readBlock(c *gin.Context, object, head bool) {
	t, err := pathTarget(c, object)
	if err != nil {
		a.fail(c, err)
		return
	}
	p := principal(c)
	if a.opts.Cluster != nil && !a.store.Contains(t.key) {
		a.readRemote(c, t, head)
		return
	}
	var info tier.BlockInfo
	level := -1
	if needsCheck(p, t) || head {
		if info, level, err = a.visible(p, t); err != nil {
			if !head {
				a.store.Missed() // a HEAD is a lookup, not a read
			}
			a.fail(c, err)
			return
		}
	}
	hdr := c.Writer.Header()
	hdr.Set("Accept-Ranges", "bytes")
	if head {
		hdr.Set("Content-Type", "application/octet-stream")
		hdr.Set("Content-Length", strconv.FormatInt(info.Size, 10))
		hdr.Set(HeaderTier, a.tierName(level))
		if info.HasChecksum {
			hdr.Set(HeaderCRC, fmt.Sprintf("%08x", info.Checksum))
		}
		setMetaHeaders(hdr, info.Meta)
		a.setSource(hdr, tier.Origin{Level: level})
		c.Status(http.StatusOK)
		return
	}
	ctx := c.Request.Context()
	// A block read from a lower tier is copied into the heap: that copy
	// is charged to the in-flight budget. Top-tier reads are pinned views
	// of the arena and cost no heap.
	e, ok := a.store.Lookup(t.key)
	if !ok {
		a.store.Missed()
		a.fail(c, notFound(t))
		return
	}
	if e.Tiers.Top() > 0 {
		release, err := a.reserve(ctx, int64(e.Size))
		if err != nil {
			a.fail(c, err)
			return
		}
		defer release()
	}
	h, level, err := a.store.Get(ctx, t.key) // counts the hit or miss
	if err != nil {
		if errors.Is(err, tier.ErrNotFound) {
			err = notFound(t)
		}
		a.fail(c, err)
		return
	}
	defer h.Release()
	a.sendBlock(c, h, tier.Origin{Level: level}, nil, false)
}

// setSource names, in a cluster, the node a block was read from.
func (a *API) setSource(hdr http.Header, o tier.Origin) {
	switch {
	case a.opts.Cluster == nil:
	case o.Level == tier.RemoteLevel:
		hdr.Set(HeaderSource, o.Source)
	default:
		hdr.Set(HeaderSource, a.opts.Cluster.Name())
	}
}

// sendBlock answers a GET (or HEAD) with the pinned block h: headers, the
// requested range, straight from the pinned view. meta, when not nil, is
// the block's record for the namespace header.
func (a *API) sendBlock(c *gin.Context, h *tier.Handle, o tier.Origin, meta []byte, head bool) {
	hdr := c.Writer.Header()
	hdr.Set("Accept-Ranges", "bytes")
	data := h.Bytes()
	start, end, partial, err := parseRange(c.GetHeader("Range"), int64(len(data)))
	if head {
		start, end, partial, err = 0, int64(len(data)), false, nil
	}
	if err != nil {
		hdr.Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
		a.fail(c, err)
		return
	}
	a.setBlockHeaders(hdr, int64(len(data)), h.Checksum(), o, meta)
	hdr.Set("Content-Length", strconv.FormatInt(end-start, 10))
	if head {
		c.Status(http.StatusOK)
		return
	}
	status := http.StatusOK
	if partial {
		status = http.StatusPartialContent
		hdr.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end-1, len(data)))
	}
	c.Status(status)
	// Straight from the pinned view to the socket: no copy in between.
	c.Writer.Write(data[start:end])
}

// setBlockHeaders sets the headers of an answer with (part of) a block of
// size bytes and CRC-32C sum, read from o; all but Content-Length. meta,
// when not nil, is the block's record for the namespace header.
func (a *API) setBlockHeaders(hdr http.Header, size int64, sum uint32, o tier.Origin, meta []byte) {
	hdr.Set("Content-Type", "application/octet-stream")
	hdr.Set(HeaderCRC, fmt.Sprintf("%08x", sum))
	if o.Level == tier.RemoteLevel {
		hdr.Set(HeaderTier, "remote")
	} else {
		hdr.Set(HeaderTier, a.tierName(o.Level))
	}
	hdr.Set(HeaderSize, strconv.FormatInt(size, 10))
	if meta != nil {
		setMetaHeaders(hdr, meta)
	}
	a.setSource(hdr, o)
}

func setMetaHeaders(hdr http.Header, meta []byte) {
	if m, ok := decodeMeta(meta); ok {
		hdr.Set(HeaderNamespace, m.Namespace)
	}
}

// parseRange parses a Range header against a block of size bytes and
// returns the half-open span [start, end) to send. A single range is
// supported ("bytes=a-b", "bytes=a-", "bytes=-n"); anything else, and any
// range that selects nothing, is an error wrapping ErrRange.
func parseRange(h string, size int64) (start, end int64, partial bool, err error) {
	if h == "" {
		return 0, size, false, nil
	}
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return 0, 0, false, fmt.Errorf("%w: %q: want bytes=FIRST-LAST", ErrRange, h)
	}
	if strings.Contains(spec, ",") {
		return 0, 0, false, fmt.Errorf("%w: %q: only one range per request is supported", ErrRange, h)
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, 0, false, fmt.Errorf("%w: %q: want bytes=FIRST-LAST", ErrRange, h)
	}
	num := func(s string) (int64, bool) {
		if s == "" || len(s) > 19 || strings.TrimLeft(s, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	switch {
	case first == "":
		n, ok := num(last)
		if !ok || n == 0 {
			return 0, 0, false, fmt.Errorf("%w: %q: want a positive suffix length", ErrRange, h)
		}
		if size == 0 {
			return 0, 0, false, fmt.Errorf("%w: %q: the block is empty", ErrRange, h)
		}
		return max(size-n, 0), size, true, nil
	default:
		s, ok := num(first)
		if !ok {
			return 0, 0, false, fmt.Errorf("%w: %q: want bytes=FIRST-LAST", ErrRange, h)
		}
		if s >= size {
			return 0, 0, false, fmt.Errorf("%w: %q starts at or after the end of the %d-byte block", ErrRange, h, size)
		}
		e := size - 1
		if last != "" {
			if e, ok = num(last); !ok || e < s {
				return 0, 0, false, fmt.Errorf("%w: %q: want FIRST <= LAST", ErrRange, h)
			}
			e = min(e, size-1)
		}
		return s, e + 1, true, nil
	}
}

type deleteResponse struct {
	Key     block.Key `json:"key"`
	Deleted bool      `json:"deleted"`
}

func (a *API) remove(c *gin.Context, object bool) {
	t, err := pathTarget(c, object)
	if err != nil {
		a.fail(c, err)
		return
	}
	if err := a.deleteTarget(c.Request.Context(), principal(c), t); err != nil {
		a.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, deleteResponse{Key: t.key, Deleted: true})
}

func (a *API) deleteTarget(ctx context.Context, p auth.Principal, t target) error {
	if a.opts.Cluster != nil && !a.store.Contains(t.key) {
		return a.deleteRemote(ctx, p, t)
	}
	if needsCheck(p, t) {
		if _, _, err := a.visible(p, t); err != nil {
			return err
		}
	}
	if err := a.store.Delete(t.key); err != nil {
		if errors.Is(err, tier.ErrNotFound) {
			return notFound(t)
		}
		return err
	}
	a.pins.release(t.key)
	if a.opts.Cluster != nil {
		// Copies elsewhere go too, before the delete is acknowledged.
		if _, err := a.opts.Cluster.Deleted(ctx, t.key); err != nil {
			a.log.Warn("server: a delete did not reach every node", "key", t.key, "err", err)
		}
	}
	return nil
}

// deleteRemote deletes a block this node does not hold from the nodes that
// do, once it has read it back to check that p may see it.
func (a *API) deleteRemote(ctx context.Context, p auth.Principal, t target) error {
	h, _, _, err := a.fetchVisible(ctx, p, t)
	if err != nil {
		return err
	}
	h.Release()
	n, err := a.opts.Cluster.Deleted(ctx, t.key)
	switch {
	case n > 0:
		if err != nil {
			a.log.Warn("server: a delete did not reach every node", "key", t.key, "err", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("%w: the nodes holding the block did not take the delete; retry", ErrUnavailable)
	}
	return notFound(t)
}
