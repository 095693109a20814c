package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/bytesize"
	"github.com/yuebing/yuebing/tier"
)

// Retention headers of a put (docs/retention.md).
const (
	// HeaderRetention is a put's retention class: pinned, high, normal or
	// low. On a block already stored it changes the block's class (a put
	// with "normal" releases a pin).
	HeaderRetention = "X-Yuebing-Retention"
	// HeaderRetentionTTL, in seconds, is how long the class holds before
	// it lapses to normal. Without it the class holds until changed.
	HeaderRetentionTTL = "X-Yuebing-Retention-TTL"
)

// maxRetentionTTL bounds HeaderRetentionTTL: ten years is "forever" for a
// cache, and keeps the deadline far from time arithmetic's overflow.
const maxRetentionTTL = 10 * 365 * 24 * time.Hour

// RetentionOptions is the retention section of yuebing serve's
// configuration: the bound on hard pins.
type RetentionOptions struct {
	// PinnedQuota bounds the bytes of blocks of class pinned that one
	// namespace may hold on this node; a put that would go over fails with
	// ErrPinQuota (HTTP 409, code pin_quota) and stores nothing. Zero
	// refuses every hard pin. Default (nil): a quarter of the fastest
	// tier's capacity, so no one tenant can pin the DRAM tier whole.
	PinnedQuota *bytesize.Size `yaml:"pinned_quota"`
}

// quota returns the configured per-namespace quota in bytes.
func (o RetentionOptions) quota(store *tier.Hierarchy) int64 {
	if o.PinnedQuota != nil {
		return int64(*o.PinnedQuota)
	}
	if ts := store.Tiers(); len(ts) > 0 {
		return ts[0].Stats().Capacity / 4
	}
	return 0
}

// Validate reports a negative quota.
func (o RetentionOptions) Validate() error {
	if o.PinnedQuota != nil && *o.PinnedQuota < 0 {
		return fmt.Errorf("%w: retention.pinned_quota %d must not be negative", ErrInvalidConfig, *o.PinnedQuota)
	}
	return nil
}

// retentionRequest is the class a request asks for.
type retentionRequest struct {
	class tier.Retention
	until time.Time // zero: no end
	set   bool      // the request named a class
}

// parseRetention reads a class and an optional TTL in seconds, as the
// headers carry them; now dates the TTL. Errors wrap ErrBadRequest and name
// the header.
func parseRetention(class, ttl string, now time.Time) (retentionRequest, error) {
	var r retentionRequest
	if class == "" {
		if ttl != "" {
			return r, fmt.Errorf("%w: %s without %s", ErrBadRequest, HeaderRetentionTTL, HeaderRetention)
		}
		return r, nil
	}
	c, err := tier.ParseRetention(class)
	if err != nil {
		return r, fmt.Errorf("%w: %s: %v", ErrBadRequest, HeaderRetention, err)
	}
	r.class, r.set = c, true
	if ttl != "" {
		n, err := strconv.ParseInt(ttl, 10, 64)
		if err != nil || n <= 0 || n > int64(maxRetentionTTL/time.Second) {
			return r, fmt.Errorf("%w: %s %q: want whole seconds from 1 to %d", ErrBadRequest, HeaderRetentionTTL, ttl, int64(maxRetentionTTL/time.Second))
		}
		r.until = now.Add(time.Duration(n) * time.Second)
	}
	return r, nil
}

// retentionHeader reads a request's retention headers.
func (a *API) retentionHeader(c *gin.Context) (retentionRequest, error) {
	return parseRetention(c.GetHeader(HeaderRetention), c.GetHeader(HeaderRetentionTTL), a.opts.Now())
}

// pinQuota accounts the bytes of hard-pinned blocks by namespace on this
// node. It is charged before a pinned block is stored (so a refused put
// stores nothing) and credited when the pin goes: a release, a delete, the
// block dropped by the store, or its TTL, found lapsed lazily. It is safe
// for concurrent use.
type pinQuota struct {
	limit int64
	now   func() time.Time
	// held reports whether a block is still stored hard-pinned; nil
	// trusts the accounting. Deletes that bypass the API (a namespace
	// cleared, RESP, the cluster dropping a replica) are found with it
	// before a charge is refused.
	held func(block.Key) bool
	mu   struct {
		sync.Mutex
		ns   map[string]int64           // pinned bytes by namespace
		keys map[block.Key]pinnedRecord // the charged blocks
	}
	bytes   *prometheus.GaugeVec
	refused *prometheus.CounterVec
}

type pinnedRecord struct {
	ns    string
	size  int64
	until int64 // Unix nanoseconds; 0: no end
	// pending is set from the charge until the block is stored pinned
	// (settle): reconcileLocked must not credit a put still in flight.
	pending bool
}

func newPinQuota(limit int64, now func() time.Time, reg *prometheus.Registry) (*pinQuota, error) {
	q := &pinQuota{limit: limit, now: now}
	q.mu.ns = make(map[string]int64)
	q.mu.keys = make(map[block.Key]pinnedRecord)
	q.bytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "yuebing_pinned_bytes", Help: "Bytes of hard-pinned blocks (retention class pinned) by namespace.",
	}, []string{"namespace"})
	q.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "yuebing_pin_quota_refusals_total", Help: "Puts and class changes refused because the namespace's pinned quota was used up.",
	}, []string{"namespace"})
	if reg != nil {
		for _, c := range []prometheus.Collector{q.bytes, q.refused} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("server: registering retention metrics: %w", err)
			}
		}
	}
	return q, nil
}

// charge counts size bytes of key as pinned in ns until the given time. A
// block already charged only has its end updated (fresh false). Over the
// quota it returns an error wrapping ErrPinQuota and charges nothing.
func (q *pinQuota) charge(ns string, key block.Key, size int64, until time.Time) (fresh bool, err error) {
	u := tier.UnixNanos(until)
	q.mu.Lock()
	defer q.mu.Unlock()
	if r, ok := q.mu.keys[key]; ok && r.ns == ns {
		r.until = u
		q.mu.keys[key] = r
		return false, nil
	}
	if used := q.mu.ns[ns]; used+size > q.limit {
		q.expireLocked(ns)
		q.reconcileLocked(ns)
		if used = q.mu.ns[ns]; used+size > q.limit {
			q.refused.WithLabelValues(ns).Inc()
			return false, fmt.Errorf("%w: namespace %q holds %d pinned bytes; %d more would pass retention.pinned_quota of %d",
				ErrPinQuota, ns, used, size, q.limit)
		}
	}
	if r, ok := q.mu.keys[key]; ok {
		q.creditLocked(key, r) // pinned under another namespace before
	}
	q.mu.keys[key] = pinnedRecord{ns: ns, size: size, until: u, pending: true}
	q.mu.ns[ns] += size
	q.bytes.WithLabelValues(ns).Set(float64(q.mu.ns[ns]))
	return true, nil
}

// settle records that key's charged pin is in the store.
func (q *pinQuota) settle(key block.Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r, ok := q.mu.keys[key]; ok {
		r.pending = false
		q.mu.keys[key] = r
	}
}

// release credits key's pin, if it is charged.
func (q *pinQuota) release(key block.Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r, ok := q.mu.keys[key]; ok {
		q.creditLocked(key, r)
	}
}

func (q *pinQuota) creditLocked(key block.Key, r pinnedRecord) {
	delete(q.mu.keys, key)
	q.mu.ns[r.ns] -= r.size
	if q.mu.ns[r.ns] <= 0 {
		delete(q.mu.ns, r.ns)
		q.bytes.DeleteLabelValues(r.ns)
		return
	}
	q.bytes.WithLabelValues(r.ns).Set(float64(q.mu.ns[r.ns]))
}

// expireLocked credits the pins of ns whose TTL has passed. It walks every
// charged block, which is fine for what it runs on: a put that would
// otherwise be refused.
func (q *pinQuota) expireLocked(ns string) {
	now := q.now().UnixNano()
	for k, r := range q.mu.keys {
		if r.until != 0 && r.until <= now && (ns == "" || r.ns == ns) {
			q.creditLocked(k, r)
		}
	}
}

// reconcileLocked credits the pins of ns whose block is gone or no longer
// pinned. Like expireLocked it runs only before a refusal.
func (q *pinQuota) reconcileLocked(ns string) {
	if q.held == nil {
		return
	}
	for k, r := range q.mu.keys {
		if r.ns == ns && !r.pending && !q.held(k) {
			q.creditLocked(k, r)
		}
	}
}

// usage returns pinned bytes by namespace, lapsed pins credited.
func (q *pinQuota) usage() map[string]int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expireLocked("")
	out := make(map[string]int64, len(q.mu.ns))
	for ns, n := range q.mu.ns {
		out[ns] = n
	}
	return out
}

// rebuild charges the hard-pinned blocks the store holds (recovered from
// SSD at start; replicas that arrive later are charged by replicaAccount) to the namespaces their records name, the API's or the
// RESP front end's, whatever the quota: they are already stored.
func (q *pinQuota) rebuild(store *tier.Hierarchy) {
	now := q.now()
	for _, t := range store.Tiers() {
		t.Range(func(k block.Key, info tier.BlockInfo) bool {
			if tier.RetentionOf(info, now) != tier.RetentionPinned {
				return true
			}
			ns, ok := pinNamespace(info.Meta)
			if !ok {
				return true
			}
			q.mu.Lock()
			if _, dup := q.mu.keys[k]; !dup {
				q.mu.keys[k] = pinnedRecord{ns: ns, size: info.Size, until: tier.UnixNanos(info.RetainUntil)}
				q.mu.ns[ns] += info.Size
				q.bytes.WithLabelValues(ns).Set(float64(q.mu.ns[ns]))
			}
			q.mu.Unlock()
			return true
		})
	}
}

// startRetention sets up the pin quota for a new API: charged from what the
// store holds, and credited when the store drops a block.
func (a *API) startRetention() error {
	if err := a.opts.Retention.Validate(); err != nil {
		return err
	}
	q, err := newPinQuota(a.opts.Retention.quota(a.store), a.opts.Now, a.opts.Registry)
	if err != nil {
		return err
	}
	store := a.store
	q.held = func(k block.Key) bool {
		info, _, err := store.Stat(k)
		return err == nil && tier.RetentionOf(info, q.now()) == tier.RetentionPinned
	}
	q.rebuild(a.store)
	a.store.OnDrop(q.release)
	a.pins = q
	if a.opts.Cluster != nil {
		a.opts.Cluster.SetReplicaAccount(replicaAccount{q})
	}
	return nil
}

// replicaAccount charges the hard-pinned replicas the cluster's leader
// places on this node to this node's quota as they arrive, and credits them
// when it drops them. A replica over the quota is refused, as Mooncake
// refuses a hard-pinned replica it cannot place rather than keep a weaker
// one: the leader's copy fails and it places the replica on another node,
// so every copy of a pinned block is pinned and charged where it lives.
type replicaAccount struct{ q *pinQuota }

// AdmitReplica implements cluster.ReplicaAccount.
func (r replicaAccount) AdmitReplica(key block.Key, info tier.BlockInfo) (func(stored bool), error) {
	if tier.RetentionOf(info, r.q.now()) != tier.RetentionPinned {
		return func(bool) {}, nil
	}
	ns, ok := pinNamespace(info.Meta)
	if !ok {
		return nil, fmt.Errorf("%w: hard-pinned replica %s carries no record naming its namespace, so it cannot be charged", ErrPinQuota, key)
	}
	fresh, err := r.q.charge(ns, key, info.Size, info.RetainUntil)
	if err != nil {
		return nil, fmt.Errorf("server: replica %s: %w", key, err)
	}
	return func(stored bool) {
		switch {
		case stored:
			r.q.settle(key)
		case fresh:
			r.q.release(key)
		}
	}, nil
}

// DroppedReplica implements cluster.ReplicaAccount.
func (r replicaAccount) DroppedReplica(key block.Key) { r.q.release(key) }

// chargePin charges a pinned put of t before it is stored; undo gives the
// charge back if the put then fails. Other classes charge nothing.
func (a *API) chargePin(t target, size int64, r retentionRequest) (undo func(), err error) {
	if r.class != tier.RetentionPinned {
		return func() {}, nil
	}
	fresh, err := a.pins.charge(t.ns, t.key, size, r.until)
	if err != nil || !fresh {
		return func() {}, err
	}
	return func() { a.pins.release(t.key) }, nil
}

// applyRetention gives a block that was already stored the class a put of
// it asked for: how a put releases or re-pins a block. A pin must already
// be charged (chargePin).
func (a *API) applyRetention(t target, r retentionRequest) error {
	if !r.set {
		return nil
	}
	if err := a.store.SetRetention(t.key, r.class, r.until); err != nil {
		return fmt.Errorf("server: setting %s's retention: %w", t.key, err)
	}
	if r.class != tier.RetentionPinned {
		a.pins.release(t.key)
	}
	return nil
}

// retentionBody is the body of POST /v1/batch/retention: the blocks (as
// POST /v1/batch/delete names them) and the class to give them.
type retentionBody struct {
	keysRequest
	Retention  string `json:"retention"`
	TTLSeconds int64  `json:"ttl_seconds,omitempty"`
}

type retentionItem struct {
	Key    block.Key    `json:"key"`
	Status string       `json:"status"` // "ok", "not_found" or "error"
	Error  *errorDetail `json:"error,omitempty"`
}

type retentionResponse struct {
	Retention string          `json:"retention"`
	Results   []retentionItem `json:"results"`
}

// batchRetention changes the class of stored blocks: "normal" is the
// explicit release of a hard pin. Each block is its own change; one over
// the quota fails alone (pin_quota) and the others still apply.
func (a *API) batchRetention(c *gin.Context) {
	var req retentionBody
	if err := a.decodeJSON(c, &req); err != nil {
		a.fail(c, err)
		return
	}
	ttl := ""
	if req.TTLSeconds != 0 {
		ttl = strconv.FormatInt(req.TTLSeconds, 10)
	}
	if req.Retention == "" {
		a.fail(c, fmt.Errorf("%w: retention is required (pinned, high, normal or low)", ErrBadRequest))
		return
	}
	r, err := parseRetention(req.Retention, ttl, a.opts.Now())
	if err != nil {
		a.fail(c, err)
		return
	}
	p := principal(c)
	ts, err := req.keysRequest.targets(p, a.limits.MaxBatchKeys)
	if err != nil {
		a.fail(c, err)
		return
	}
	res := retentionResponse{Retention: r.class.String(), Results: make([]retentionItem, len(ts))}
	for i, t := range ts {
		res.Results[i] = retentionItem{Key: t.key, Status: "ok"}
		if err := a.retain(p, t, r); err != nil {
			_, code := apiError(err)
			res.Results[i].Status = "error"
			if errors.Is(err, ErrNotFound) {
				res.Results[i].Status = "not_found"
			}
			res.Results[i].Error = &errorDetail{Code: code, Message: err.Error()}
		}
	}
	c.JSON(http.StatusOK, res)
}

// retain gives one stored block, which p must be able to see, class r.
func (a *API) retain(p interface{ CanAccess(string) bool }, t target, r retentionRequest) error {
	info, _, err := a.store.Stat(t.key)
	if err != nil {
		return notFound(t)
	}
	m, ok := decodeMeta(info.Meta)
	if !ok || m.Namespace != t.ns || t.object && (m.Name != t.name || !m.HasName) || !p.CanAccess(m.Namespace) {
		return notFound(t)
	}
	undo, err := a.chargePin(t, info.Size, r)
	if err != nil {
		return err
	}
	if err := a.applyRetention(t, r); err != nil {
		undo()
		if errors.Is(err, tier.ErrNotFound) {
			return notFound(t)
		}
		return err
	}
	a.pins.settle(t.key)
	return nil
}

// RetainBlock gives a stored block of namespace ns the named class for ttl
// (0: until changed), as POST /v1/batch/retention does for one block: what
// a front end without HTTP (RESP's SET ... RETENTION class) calls. Errors
// wrap ErrBadRequest (a bad class), ErrNotFound and ErrPinQuota.
func (a *API) RetainBlock(ctx context.Context, ns string, key block.Key, class string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var ttlStr string
	if ttl > 0 {
		ttlStr = strconv.FormatInt(int64((ttl+time.Second-1)/time.Second), 10)
	}
	r, err := parseRetention(class, ttlStr, a.opts.Now())
	if err != nil {
		return err
	}
	if !r.set {
		return fmt.Errorf("%w: %s is required", ErrBadRequest, HeaderRetention)
	}
	return a.retain(anyNamespace{}, target{key: key, ns: ns}, r)
}

// anyNamespace is the access of a front end that checked its caller itself.
type anyNamespace struct{}

func (anyNamespace) CanAccess(string) bool { return true }

// PinnedBytes returns this node's hard-pinned bytes by namespace.
func (a *API) PinnedBytes() map[string]int64 { return a.pins.usage() }

// retainAll gives the stored blocks of ns among keys class r, as a context
// with a retention asks: hard pins are charged for all of them first, and a
// refusal changes nothing. Blocks not stored here, or recorded under
// another namespace, are skipped. undo puts the changed blocks back to
// normal and gives the charges back.
func (a *API) retainAll(ns string, keys []block.Key, r retentionRequest) (undo func(), err error) {
	var (
		held    []target
		charged []func()
	)
	giveBack := func() {
		for _, u := range charged {
			u()
		}
	}
	for _, k := range keys {
		info, _, err := a.store.Stat(k)
		if err != nil {
			continue
		}
		if m, ok := decodeMeta(info.Meta); !ok || m.Namespace != ns {
			continue
		}
		t := target{key: k, ns: ns}
		u, err := a.chargePin(t, info.Size, r)
		if err != nil {
			giveBack()
			return func() {}, err
		}
		charged = append(charged, u)
		held = append(held, t)
	}
	var applied []target
	for _, t := range held {
		if err := a.applyRetention(t, r); err == nil {
			applied = append(applied, t)
			a.pins.settle(t.key)
		}
	}
	return func() {
		for _, t := range applied {
			_ = a.store.SetRetention(t.key, tier.RetentionNormal, time.Time{})
		}
		giveBack()
	}, nil
}
