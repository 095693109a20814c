package s3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/expiry"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/policy"
)

// Tier keeps blocks in an S3-compatible bucket, packed into segment objects.
// It is safe for concurrent use. Reads of blocks not yet uploaded are served
// from memory; the others are ranged GETs, verified against the block's
// CRC-32C. It never returns bytes that fail verification.
type Tier struct {
	opts   Options
	cl     *minio.Client
	prefix string // Namespace + "/seg/"

	mu struct {
		sync.Mutex
		entries      map[block.Key]*entry
		segs         map[string]*segment // uploaded or pending, by object name
		open         *segment
		pending      []*segment // sealed, awaiting upload, oldest first
		pendingBytes int64      // value bytes in pending and open segments
		used         int64
		pol          *policy.Classed[block.Key] // one queue per retention rank
		retains      expiry.Heap[block.Key]     // ends of classes
		room         chan struct{}              // closed when pendingBytes drops or health changes
		health       tier.Health
		needLoad     bool // started degraded: the bucket's segments are not loaded yet
		lastRefresh  time.Time
		closed       bool
	}

	upMu    sync.Mutex // held while uploading; see uploadPending
	evict   atomic.Pointer[tier.EvictHandler]
	version atomic.Uint64
	kick    chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	hits, misses, puts, deletes, evictions, corrupt atomic.Int64
	dropped, compactions                            atomic.Int64
	reqs                                            [numOps][2]atomic.Int64
}

var (
	_ tier.Tier           = (*Tier)(nil)
	_ tier.EvictNotifier  = (*Tier)(nil)
	_ tier.HealthReporter = (*Tier)(nil)
	_ tier.Retainer       = (*Tier)(nil)
)

type entry struct {
	seg         *segment
	off, size   int64
	crc         uint32
	meta        []byte
	pinnedUntil time.Time
	version     uint64
	retention   tier.Retention
	retainUntil int64 // Unix nanoseconds; 0: the class does not end
}

func (e *entry) charge() int64 { return e.size + int64(len(e.meta)) }

type segment struct {
	name      string
	data      []byte // value bytes while not uploaded; nil once uploaded
	obj       []byte // the whole object once sealed, until uploaded
	dataLen   int64
	live      int64 // value bytes of live blocks
	keys      []block.Key
	tombs     []tombstone
	created   time.Time
	uploaded  bool
	obsolete  bool     // compacted: to be deleted once its successor is uploaded
	obsoletes []string // objects to delete once this one is uploaded
}

// Open connects to the bucket and loads the index from the segments' footers.
// A bucket that is missing, refuses the credentials or cannot be reached
// fails Open with ErrBucket naming the setting, unless opts.DegradedOK: then
// the tier starts degraded and loads the index when the bucket answers.
func Open(ctx context.Context, opts Options) (*Tier, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	host, secure, _ := splitEndpoint(opts.Endpoint)
	var creds *credentials.Credentials
	if opts.AccessKeyID != "" {
		creds = credentials.NewStaticV4(opts.AccessKeyID, opts.SecretAccessKey, "")
	} else {
		creds = credentials.New(&credentials.Static{}) // anonymous
	}
	cl, err := minio.New(host, &minio.Options{
		Creds:        creds,
		Secure:       secure,
		Region:       opts.Region,
		BucketLookup: minio.BucketLookupPath,
		// The tier retries by itself (degraded, probe, re-upload): a
		// request retried inside the client would hold a put or a read
		// for up to ten times RequestTimeout.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: s3.endpoint %q: %v", ErrConfig, opts.Endpoint, err)
	}
	pol, err := policy.NewClassed[block.Key](opts.Policy, int64(opts.Capacity), tier.NumRanks)
	if err != nil {
		return nil, fmt.Errorf("%w: s3.policy: %v", ErrConfig, err)
	}
	t := &Tier{opts: opts, cl: cl, prefix: opts.Namespace + "/seg/", kick: make(chan struct{}, 1)}
	t.mu.entries = map[block.Key]*entry{}
	t.mu.segs = map[string]*segment{}
	t.mu.pol = pol
	t.mu.room = make(chan struct{})
	t.mu.health.IOErrors = map[string]int64{}
	if err := t.checkBucket(ctx); err == nil {
		err = t.refresh(ctx)
		if err != nil && !opts.DegradedOK {
			return nil, fmt.Errorf("%w: loading the index from s3.bucket %q: %v", ErrBucket, opts.Bucket, err)
		}
		if err != nil {
			t.mu.needLoad = true
			t.degrade("index", err)
		}
	} else if opts.DegradedOK {
		t.mu.needLoad = true
		t.degrade("index", err)
	} else {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	t.wg.Go(func() { t.loop(bg) })
	return t, nil
}

// checkBucket says, naming the setting, why the bucket cannot be used.
func (t *Tier) checkBucket(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, t.opts.RequestTimeout)
	defer cancel()
	ok, err := t.cl.BucketExists(rctx, t.opts.Bucket)
	t.count(opHead, err)
	switch {
	case err != nil && isAuth(err):
		return fmt.Errorf("%w: s3 credentials (access key id from the configuration) rejected by s3.endpoint %s: %s", ErrBucket, t.opts.Endpoint, minio.ToErrorResponse(err).Code)
	case err != nil:
		return fmt.Errorf("%w: s3.endpoint %s unreachable: %v", ErrBucket, t.opts.Endpoint, err)
	case !ok:
		return fmt.Errorf("%w: s3.bucket %q does not exist at s3.endpoint %s", ErrBucket, t.opts.Bucket, t.opts.Endpoint)
	}
	return nil
}

func isAuth(err error) bool {
	r := minio.ToErrorResponse(err)
	switch r.Code {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidSecurity":
		return true
	}
	return r.StatusCode == 403
}

func isNoSuchKey(err error) bool { return minio.ToErrorResponse(err).Code == "NoSuchKey" }

// Name implements tier.Tier.
func (t *Tier) Name() string { return "s3" }

// SetEvictHandler implements tier.EvictNotifier. The handler always gets a
// nil handle: the S3 tier is the bottom of a hierarchy.
func (t *Tier) SetEvictHandler(fn tier.EvictHandler) { t.evict.Store(&fn) }

// Put implements tier.Tier. The block is readable at once (from memory) and
// uploaded with its segment.
func (t *Tier) Put(ctx context.Context, key block.Key, value []byte, opts tier.PutOptions) error {
	if err := t.precheck(key, int64(len(value)), opts); err != nil {
		return err
	}
	sum := block.Checksum(value)
	if opts.HasChecksum && sum != opts.Checksum {
		return tier.ErrChecksum
	}
	return t.put(ctx, key, value, sum, opts)
}

func (t *Tier) precheck(key block.Key, size int64, opts tier.PutOptions) error {
	if len(opts.Meta) > tier.MaxMeta {
		return tier.ErrMeta
	}
	if size+int64(len(opts.Meta)) > int64(t.opts.Capacity) {
		return fmt.Errorf("%w: %d bytes, s3 capacity %d", tier.ErrTooLarge, size, int64(t.opts.Capacity))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return tier.ErrClosed
	}
	if _, ok := t.mu.entries[key]; ok {
		return tier.ErrExists
	}
	return nil
}

type victim struct {
	key  block.Key
	info tier.BlockInfo
}

func (t *Tier) put(ctx context.Context, key block.Key, value []byte, sum uint32, opts tier.PutOptions) error {
	size := int64(len(value))
	charge := size + int64(len(opts.Meta))
	var victims []victim
	t.mu.Lock()
	for {
		if t.mu.closed {
			t.mu.Unlock()
			return tier.ErrClosed
		}
		if _, ok := t.mu.entries[key]; ok {
			t.mu.Unlock()
			return tier.ErrExists
		}
		if t.mu.pendingBytes == 0 || t.mu.pendingBytes+size <= int64(t.opts.MaxPending) {
			break
		}
		if t.mu.health.Degraded && t.opts.WhenDegraded == "drop" {
			cause := t.mu.health.Cause
			t.mu.Unlock()
			t.dropped.Add(1)
			return fmt.Errorf("%w: s3 degraded (%s), %d bytes waiting for upload", tier.ErrUnavailable, cause, int64(t.opts.MaxPending))
		}
		room := t.mu.room
		t.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for s3 uploads: %w", tier.ErrUnavailable, ctx.Err())
		}
		t.mu.Lock()
	}
	evictable := t.evictableLocked()
	for t.mu.used+charge > int64(t.opts.Capacity) {
		k, ok := t.mu.pol.Evict(evictable)
		if !ok {
			t.mu.Unlock()
			t.notifyEvicted(ctx, victims)
			return fmt.Errorf("%w: s3 tier full of pinned blocks", tier.ErrNoSpace)
		}
		e := t.mu.entries[k]
		victims = append(victims, victim{k, e.info()})
		t.removeLocked(k, e, false)
		t.evictions.Add(1)
	}
	s := t.openLocked()
	e := &entry{seg: s, off: int64(len(s.data)), size: size, crc: sum, pinnedUntil: opts.PinnedUntil, version: t.version.Add(1)}
	if len(opts.Meta) > 0 {
		e.meta = append([]byte(nil), opts.Meta...)
	}
	t.startClassLocked(key, e, opts.Retention, tier.UnixNanos(opts.RetainUntil))
	s.data = append(s.data, value...)
	s.dataLen += size
	s.live += size
	s.keys = append(s.keys, key)
	t.mu.entries[key] = e
	t.mu.pol.Add(key, policy.Info[block.Key]{Size: max(charge, 1), Parent: opts.Parent, HasParent: opts.HasParent, Class: e.policyClass()})
	t.mu.used += charge
	t.mu.pendingBytes += size
	if int64(len(s.data)) >= int64(t.opts.SegmentSize) {
		t.sealLocked()
	}
	t.mu.Unlock()
	t.puts.Add(1)
	t.notifyEvicted(ctx, victims)
	return nil
}

func (t *Tier) notifyEvicted(ctx context.Context, victims []victim) {
	if len(victims) == 0 {
		return
	}
	fn := t.evict.Load()
	if fn == nil {
		return
	}
	for _, v := range victims {
		(*fn)(ctx, v.key, v.info, nil)
	}
}

func (e *entry) info() tier.BlockInfo {
	return tier.BlockInfo{Size: e.size, Checksum: e.crc, HasChecksum: true, Version: e.version, PinnedUntil: e.pinnedUntil, Meta: e.meta,
		Retention: e.retention, RetainUntil: tier.FromUnixNanos(e.retainUntil)}
}

// openLocked returns the open segment, starting one if needed.
func (t *Tier) openLocked() *segment {
	if t.mu.open == nil {
		var r [4]byte
		rand.Read(r[:])
		now := time.Now()
		// Names sort by creation time, so loading in name order applies
		// segments oldest first and a later copy of a key wins.
		name := fmt.Sprintf("%s%016x-%s", t.prefix, now.UnixNano(), hex.EncodeToString(r[:]))
		t.mu.open = &segment{name: name, created: now}
		t.mu.segs[name] = t.mu.open
	}
	return t.mu.open
}

// removeLocked forgets a block. Unless the block is in the open segment, a
// tombstone in the open segment records the removal in the bucket.
func (t *Tier) removeLocked(k block.Key, e *entry, fromPolicy bool) {
	delete(t.mu.entries, k)
	if fromPolicy {
		t.mu.pol.Remove(k)
	}
	t.mu.used -= e.charge()
	e.seg.live -= e.size
	if e.seg != t.mu.open {
		o := t.openLocked()
		o.tombs = append(o.tombs, tombstone{Seg: e.seg.name, Key: k})
	}
	t.signalLocked() // a mostly dead segment may now be compacted
}

func (t *Tier) signalLocked() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// sealLocked closes the open segment: its object (live blocks, footer,
// trailer) is built and queued for upload.
func (t *Tier) sealLocked() {
	s := t.mu.open
	if s == nil {
		return
	}
	t.mu.open = nil
	f := &footer{}
	for _, k := range s.keys {
		if e := t.mu.entries[k]; e != nil && e.seg == s {
			f.Entries = append(f.Entries, footerEntry{Key: k, Off: e.off, Len: e.size, CRC: e.crc, PinnedUntil: pinNanos(e.pinnedUntil), Meta: e.meta,
				Retention: e.retention, RetainUntil: e.retainUntil})
		}
	}
	for _, tb := range s.tombs {
		if _, ok := t.mu.segs[tb.Seg]; ok {
			f.Tombs = append(f.Tombs, tb)
		}
	}
	if len(f.Entries) == 0 && len(f.Tombs) == 0 && len(s.obsoletes) == 0 {
		delete(t.mu.segs, s.name)
		t.mu.pendingBytes -= int64(len(s.data))
		t.signalRoomLocked()
		return
	}
	s.tombs = f.Tombs
	s.obj = appendFooter(s.data[:len(s.data):len(s.data)], f)
	s.data = s.obj[:s.dataLen]
	t.mu.pending = append(t.mu.pending, s)
	t.signalLocked()
}

func (t *Tier) signalRoomLocked() {
	close(t.mu.room)
	t.mu.room = make(chan struct{})
}

// Create implements tier.Tier.
func (t *Tier) Create(ctx context.Context, key block.Key, size int64, opts tier.PutOptions) (tier.Writer, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: negative size %d", tier.ErrSize, size)
	}
	if err := t.precheck(key, size, opts); err != nil {
		return nil, err
	}
	return &writer{t: t, key: key, size: size, opts: opts, buf: make([]byte, 0, size)}, nil
}

// Get implements tier.Tier. The handle holds a private copy.
func (t *Tier) Get(ctx context.Context, key block.Key) (*tier.Handle, error) {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil, tier.ErrClosed
	}
	e, ok := t.mu.entries[key]
	if !ok {
		t.mu.Unlock()
		t.misses.Add(1)
		return nil, tier.ErrNotFound
	}
	t.mu.pol.Access(key)
	if e.seg.data != nil || e.size == 0 {
		buf := make([]byte, e.size)
		if e.size > 0 {
			copy(buf, e.seg.data[e.off:e.off+e.size])
		}
		t.mu.Unlock()
		return t.verified(key, e, buf)
	}
	if t.mu.health.Degraded {
		cause := t.mu.health.Cause
		t.mu.Unlock()
		t.misses.Add(1)
		return nil, fmt.Errorf("%w: s3 degraded (%s)", tier.ErrUnavailable, cause)
	}
	name, off, size := e.seg.name, e.off, e.size
	t.mu.Unlock()
	buf, err := t.getRange(ctx, name, off, size)
	if err != nil {
		t.misses.Add(1)
		if isNoSuchKey(err) {
			// Compacted away by another node sharing the namespace.
			t.dropEntry(key, e)
			return nil, tier.ErrNotFound
		}
		if ctx.Err() == nil {
			t.degrade("read", err)
		}
		return nil, fmt.Errorf("%w: s3 read of %s: %v", tier.ErrUnavailable, name, err)
	}
	return t.verified(key, e, buf)
}

// verified hands out buf, the bytes read for e, if they match the length
// and CRC-32C its footer recorded; else it drops the block, which is never
// served, and returns tier.ErrCorrupt.
func (t *Tier) verified(key block.Key, e *entry, buf []byte) (*tier.Handle, error) {
	if err := block.Verify(buf, uint64(e.size), e.crc); err != nil {
		t.corrupt.Add(1)
		t.misses.Add(1)
		t.dropEntry(key, e)
		t.opts.Logger.Warn("s3: corrupt block dropped", "segment", e.seg.name, "offset", e.off, "size", e.size, "err", err)
		return nil, fmt.Errorf("s3: block in %s at %d: %w", e.seg.name, e.off, err)
	}
	t.hits.Add(1)
	return tier.NewHandle(buf, e.crc, nil), nil
}

// dropEntry removes e if it is still key's entry.
func (t *Tier) dropEntry(key block.Key, e *entry) {
	t.mu.Lock()
	if t.mu.entries[key] == e {
		t.removeLocked(key, e, true)
	}
	t.mu.Unlock()
}

// Stat implements tier.Tier.
func (t *Tier) Stat(key block.Key) (tier.BlockInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.mu.entries[key]
	if !ok {
		return tier.BlockInfo{}, tier.ErrNotFound
	}
	return e.info(), nil
}

// Delete implements tier.Tier. The bytes stay in their object until
// compaction rewrites it; a tombstone keeps a restart from reviving them.
func (t *Tier) Delete(key block.Key) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.mu.entries[key]
	if !ok {
		return tier.ErrNotFound
	}
	t.removeLocked(key, e, true)
	t.deletes.Add(1)
	return nil
}

// Pin implements tier.Tier. A pin set after the block's segment was sealed
// lasts until the process stops; the bucket keeps the pin the block had
// when it was written.
func (t *Tier) Pin(key block.Key, until time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.mu.entries[key]
	if !ok {
		return tier.ErrNotFound
	}
	e.pinnedUntil = until
	return nil
}

// Range implements tier.Tier.
func (t *Tier) Range(fn func(key block.Key, info tier.BlockInfo) bool) {
	t.mu.Lock()
	items := make([]tier.KeyInfo, 0, len(t.mu.entries))
	for k, e := range t.mu.entries {
		items = append(items, tier.KeyInfo{Key: k, Info: e.info()})
	}
	t.mu.Unlock()
	tier.Visit(items, fn)
}

// Stats implements tier.Tier.
func (t *Tier) Stats() tier.Stats {
	t.mu.Lock()
	used, blocks := t.mu.used, int64(len(t.mu.entries))
	var pinned int64
	now := t.opts.Now()
	for _, e := range t.mu.entries {
		if e.pinnedUntil.After(now) {
			pinned += e.charge()
		}
	}
	t.mu.Unlock()
	return tier.Stats{
		Name: t.Name(), Capacity: int64(t.opts.Capacity), Used: used, Blocks: blocks, Pinned: pinned,
		Hits: t.hits.Load(), Misses: t.misses.Load(), Puts: t.puts.Load(), Deletes: t.deletes.Load(),
		Evictions: t.evictions.Load(), Corrupt: t.corrupt.Load(),
	}
}

// Health implements tier.HealthReporter.
func (t *Tier) Health() tier.Health {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.mu.health
	h.IOErrors = make(map[string]int64, len(t.mu.health.IOErrors))
	for k, v := range t.mu.health.IOErrors {
		h.IOErrors[k] = v
	}
	return h
}

// degrade marks the tier degraded; the loop probes the bucket to recover.
func (t *Tier) degrade(cause string, err error) {
	if isAuth(err) {
		cause = "auth"
	}
	t.mu.Lock()
	t.mu.health.IOErrors[cause]++
	was := t.mu.health.Degraded
	if !was {
		t.mu.health.Degraded = true
		t.mu.health.Cause = cause
		t.mu.health.Reason = err.Error()
		t.mu.health.Since = time.Now()
		t.signalRoomLocked() // "drop" puts waiting for room give up now
	}
	t.mu.Unlock()
	if !was {
		t.opts.Logger.Warn("s3: tier degraded", "cause", cause, "endpoint", t.opts.Endpoint, "bucket", t.opts.Bucket, "err", err)
	}
}

func (t *Tier) recover() {
	t.mu.Lock()
	was := t.mu.health.Degraded
	if was {
		t.mu.health.Degraded = false
		t.mu.health.Cause, t.mu.health.Reason, t.mu.health.Since = "", "", time.Time{}
		t.mu.health.Recoveries++
		t.signalRoomLocked()
	}
	t.mu.Unlock()
	if was {
		t.opts.Logger.Info("s3: tier recovered", "endpoint", t.opts.Endpoint, "bucket", t.opts.Bucket)
	}
}

// Flush seals the open segment and uploads every pending one. It returns
// tier.ErrUnavailable if the bucket fails.
func (t *Tier) Flush(ctx context.Context) error {
	t.mu.Lock()
	t.sealLocked()
	t.mu.Unlock()
	return t.uploadPending(ctx)
}

// Close implements tier.Tier: it uploads what is buffered (unless the bucket
// is failing, then it is lost: the tier is a cache) and stops.
func (t *Tier) Close() error {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil
	}
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
	var err error
	if !t.Health().Degraded {
		ctx, cancel := context.WithTimeout(context.Background(), 4*t.opts.RequestTimeout)
		err = t.Flush(ctx)
		cancel()
	}
	t.mu.Lock()
	t.mu.closed = true
	t.signalRoomLocked()
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("s3: close: %w", err)
	}
	return nil
}

// errUnavailable wraps an S3 error.
func errUnavailable(op string, err error) error {
	if errors.Is(err, tier.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: s3 %s: %v", tier.ErrUnavailable, op, err)
}

// Shared implements tier.SharedTier: other nodes configured with the same
// bucket and namespace add blocks, so a hierarchy looks here after a miss
// in its own index.
func (t *Tier) Shared() bool { return true }

var _ tier.SharedTier = (*Tier)(nil)
