package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/rdma"
)

// Options configure a Connector.
type Options struct {
	// Client reaches the engine's yuebing node (same host or not).
	// Required.
	Client *client.Client
	// Namespace is "tenant/model" (block.ValidateNamespace). Required.
	Namespace string
	// Layout is the model's KV shape. Required.
	Layout Layout
	// Cluster asks the cluster query (an admin call) when the local node
	// holds less than the whole prompt. Default false: single node.
	Cluster bool
	// LoadDepth is how many layers of one Load are in flight at once.
	// Default 4: enough to keep the connection busy while the engine
	// consumes layers in order, few enough that early layers come first.
	LoadDepth int
	// LoadRequestBytes is about how many bytes one multi-get of a Load
	// carries: several layers per request when layers are small, since a
	// request costs a round trip and layers still arrive one by one
	// within it. Queued saves are coalesced into multi-puts of about as
	// many bytes. Default 4 MiB.
	LoadRequestBytes int64
	// SaveQueue bounds the layer saves waiting for a worker. Default 256.
	SaveQueue int
	// SaveStagingBytes bounds the host memory holding saved layers until
	// the server has them: a group of layers is staged whole, from its
	// first layer to its put. Default 64 MiB.
	SaveStagingBytes int64
	// SaveWorkers is the number of goroutines sending saves. Default 2.
	SaveWorkers int
	// DisableShm keeps every transfer on HTTP. By default the connector
	// asks the node for shared-memory sessions (GET /v1/shm and its unix
	// socket); when the node is on the same host, loads and saves move
	// block bytes through the shared segment, with no HTTP framing:
	// Load copies from the segment straight into the target's memory,
	// verifying each block's CRC-32C as it copies. Elsewhere, or when a
	// session cannot be opened, HTTP.
	DisableShm bool
	// Transfer, with TransferAddr, reads loads by key over the transfer
	// service of the engine's node: the path for an engine on another host
	// than its node, where shared memory is not at hand. Transfer is an
	// rdma.Engine the engine started with the cluster's token (the node
	// serves reads by key in a cluster), TransferAddr the node's transfer
	// address (its banner's "transfer" line, or node.addrs.transfer of
	// GET /v1/cluster). The bytes go from the socket straight into the
	// target's memory, each group checked against its CRC-32C; a block
	// the node does not hold itself (it is on another node) and the rest
	// of its request are read over HTTP through the node. Reads by key are
	// not scoped to a namespace: an engine given the cluster token is
	// trusted as a node is. Default nil: HTTP.
	Transfer     *rdma.Engine
	TransferAddr string
	// WarmSSD starts reading blocks a Lookup found on SSD right away, so
	// the server has them in DRAM when the Load comes. Default true
	// (DisableWarm turns it off).
	DisableWarm bool
	// Logger receives save and warm failures. Default slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills the zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.LoadDepth == 0 {
		o.LoadDepth = 4
	}
	if o.LoadRequestBytes == 0 {
		o.LoadRequestBytes = 4 << 20
	}
	if o.SaveQueue == 0 {
		o.SaveQueue = 256
	}
	if o.SaveStagingBytes == 0 {
		o.SaveStagingBytes = 64 << 20
	}
	if o.SaveWorkers == 0 {
		o.SaveWorkers = 2
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every problem at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Client == nil {
		errs = append(errs, fmt.Errorf("%w: Options.Client is required", ErrInvalid))
	}
	if err := block.ValidateNamespace(o.Namespace); err != nil {
		errs = append(errs, fmt.Errorf("%w: Options.Namespace: %w", ErrInvalid, err))
	}
	if err := o.Layout.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"LoadDepth", int64(o.LoadDepth)}, {"LoadRequestBytes", o.LoadRequestBytes}, {"SaveQueue", int64(o.SaveQueue)}, {"SaveStagingBytes", o.SaveStagingBytes}, {"SaveWorkers", int64(o.SaveWorkers)}} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("%w: Options.%s %d must be positive", ErrInvalid, f.name, f.v))
		}
	}
	if (o.Transfer == nil) != (o.TransferAddr == "") {
		errs = append(errs, fmt.Errorf("%w: Options.Transfer and Options.TransferAddr go together", ErrInvalid))
	}
	if len(errs) == 0 && o.SaveStagingBytes < o.Layout.GroupBytes(0) {
		errs = append(errs, fmt.Errorf("%w: Options.SaveStagingBytes %d holds not one group of layers of %d bytes", ErrInvalid, o.SaveStagingBytes, o.Layout.GroupBytes(0)))
	}
	return errors.Join(errs...)
}

// Connector is the adapter of one engine process. It is safe for concurrent
// use; its goroutines (save workers, warming) stop in Close.
type Connector struct {
	opts   Options
	cl     *client.Client
	layout Layout
	commit []byte

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // save workers
	warmWG  sync.WaitGroup
	saves   chan *layerJob
	queueMu sync.RWMutex
	pending atomic.Int64
	stage   *staging
	warm    chan []block.Key
	closed  atomic.Bool
	shm     *shmPool // nil with DisableShm
	// regionsOffUntil (unix nanoseconds) is when to try registered
	// regions again after the node refused one.
	regionsOffUntil atomic.Int64
	// savesOffUntil is the same for the save staging region.
	savesOffUntil atomic.Int64

	st stats
}

type stats struct {
	lookups, hitBlocks, clusterHits, lookupErrors   atomic.Int64
	loads, loadedBytes, loadedLayers, shortLayers   atomic.Int64
	savedLayers, savedBytes, dropped, saveErrors    atomic.Int64
	committed, deduped, warmed, warmSkipped, warmFa atomic.Int64
	shmLoads, shmSaves                              atomic.Int64
	shmRegionLoads, shmRegionSaves                  atomic.Int64
	shmDirect, shmStaged                            atomic.Int64
	transferLoads, transferFallbacks                atomic.Int64
}

// Stats are a Connector's counters since New.
type Stats struct {
	Lookups      int64 `json:"lookups"`
	HitBlocks    int64 `json:"hit_blocks"`
	ClusterHits  int64 `json:"cluster_hits"`
	LookupErrors int64 `json:"lookup_errors"`
	Loads        int64 `json:"loads"`
	LoadedBytes  int64 `json:"loaded_bytes"`
	LoadedLayers int64 `json:"loaded_layers"`
	// ShortLayers counts layers that came back with fewer valid blocks
	// than planned (missing, corrupt, node gone).
	ShortLayers int64 `json:"short_layers"`
	SavedLayers int64 `json:"saved_layers"`
	SavedBytes  int64 `json:"saved_bytes"`
	// Dropped counts layer saves refused because the queue or the staging
	// memory was full: the engine was not blocked, the block not committed.
	Dropped    int64 `json:"save_dropped"`
	SaveErrors int64 `json:"save_errors"`
	Committed  int64 `json:"committed"`
	// Deduped counts blocks a save skipped because the store had them.
	Deduped     int64 `json:"deduped"`
	Warmed      int64 `json:"warmed"`
	WarmSkipped int64 `json:"warm_skipped"`
	WarmFailed  int64 `json:"warm_failed"`
	// ShmLoadRequests and ShmSaveRequests count the load requests and
	// save batches that went through shared memory rather than HTTP.
	ShmLoadRequests int64 `json:"shm_load_requests"`
	ShmSaveRequests int64 `json:"shm_save_requests"`
	// ShmRegionLoadRequests counts the shared-memory load requests the
	// node wrote straight into the target's registered memory
	// (RegisteredTarget); ShmDirectBytes their bytes. ShmStagedBytes counts
	// the bytes copied between a session's segment and the engine's
	// memory: the copy registered memory avoids.
	ShmRegionLoadRequests int64 `json:"shm_region_load_requests"`
	// ShmRegionSaveRequests counts the save batches the node stored
	// straight out of the connector's save staging memory.
	ShmRegionSaveRequests int64 `json:"shm_region_save_requests"`
	ShmDirectBytes        int64 `json:"shm_direct_bytes"`
	ShmStagedBytes        int64 `json:"shm_staged_bytes"`
	// TransferLoadRequests counts load requests read by key over the
	// transfer service (Options.Transfer); TransferFallbacks those of them
	// finished over HTTP, for a block the node did not hold itself or a
	// transfer service that could not be reached.
	TransferLoadRequests int64 `json:"transfer_load_requests"`
	TransferFallbacks    int64 `json:"transfer_fallbacks"`
}

// New starts a Connector.
func New(opts Options) (*Connector, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := &Connector{
		opts: opts, cl: opts.Client, layout: opts.Layout, commit: opts.Layout.commitRecord(),
		saves: make(chan *layerJob, opts.SaveQueue),
		stage: newStaging(opts.Layout.GroupBytes(0), opts.SaveStagingBytes, !opts.DisableShm),
		// One warm at a time is queued behind the running one: warming is
		// a hint, and a backlog of it would compete with real loads.
		warm: make(chan []block.Key, 1),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if !opts.DisableShm {
		// A session carries one load request (about LoadRequestBytes) or
		// one save batch, and at least two groups of one block.
		size := max(opts.LoadRequestBytes, 2*opts.Layout.GroupBytes(0)) + 1<<20
		c.shm = newShmPool(opts.Client, opts.LoadDepth+opts.SaveWorkers, size)
	}
	for range opts.SaveWorkers {
		c.wg.Go(c.saveWorker)
	}
	c.warmWG.Go(c.warmer)
	return c, nil
}

// Layout returns the connector's layout.
func (c *Connector) Layout() Layout { return c.layout }

// Close stops taking work, lets queued saves finish until ctx ends (then
// drops them), and waits for every goroutine.
func (c *Connector) Close(ctx context.Context) error {
	if c.closed.Swap(true) {
		return nil
	}
	// Queued saves finish unless ctx ends first; then the workers drop
	// what is left and a LayerWait blocked on a full queue gives up.
	stopWaiters := context.AfterFunc(ctx, c.cancel)
	defer stopWaiters()
	c.queueMu.Lock()
	close(c.saves)
	c.queueMu.Unlock()
	c.wg.Wait()
	c.cancel()
	c.warmWG.Wait()
	if c.shm != nil {
		c.shm.close()
	}
	c.stage.close()
	return ctx.Err()
}

// Stats returns the counters.
func (c *Connector) Stats() Stats {
	s := &c.st
	return Stats{
		Lookups: s.lookups.Load(), HitBlocks: s.hitBlocks.Load(), ClusterHits: s.clusterHits.Load(), LookupErrors: s.lookupErrors.Load(),
		Loads: s.loads.Load(), LoadedBytes: s.loadedBytes.Load(), LoadedLayers: s.loadedLayers.Load(), ShortLayers: s.shortLayers.Load(),
		SavedLayers: s.savedLayers.Load(), SavedBytes: s.savedBytes.Load(), Dropped: s.dropped.Load(), SaveErrors: s.saveErrors.Load(),
		Committed: s.committed.Load(), Deduped: s.deduped.Load(), Warmed: s.warmed.Load(), WarmSkipped: s.warmSkipped.Load(), WarmFailed: s.warmFa.Load(),
		ShmLoadRequests: s.shmLoads.Load(), ShmSaveRequests: s.shmSaves.Load(),
		ShmRegionLoadRequests: s.shmRegionLoads.Load(), ShmRegionSaveRequests: s.shmRegionSaves.Load(), ShmDirectBytes: s.shmDirect.Load(), ShmStagedBytes: s.shmStaged.Load(),
		TransferLoadRequests: s.transferLoads.Load(), TransferFallbacks: s.transferFallbacks.Load(),
	}
}

// Tier names in a Plan: those the server reports ("dram", "ssd"), and
// TierRemote for a block only another node of the cluster holds.
const TierRemote = "remote"

// Plan is the answer to Lookup: which blocks of a prompt are cached.
type Plan struct {
	// Tokens is the prompt length; Keys the chained keys of its full blocks.
	Tokens int
	Keys   []block.Key
	// HitBlocks leading blocks are cached; Tiers[i] says where block i's
	// fastest copy is, for i < HitBlocks.
	HitBlocks int
	Tiers     []string
	// Stored says, key by key, whether the store holds the block (a block
	// after a gap can be stored too); Save skips those.
	Stored []bool
}

// HitTokens is the number of prompt tokens the hit covers.
func (p Plan) HitTokens(l Layout) int { return p.HitBlocks * l.BlockTokens }

// Lookup finds the longest cached prefix of tokens: the local node first,
// then, with Options.Cluster, the cluster query when the local node holds
// less than every full block. Blocks found on SSD start warming into DRAM
// at once. A failed lookup is reported with an empty plan (the engine
// recomputes): the error is for logs.
func (c *Connector) Lookup(ctx context.Context, tokens []uint32) (Plan, error) {
	c.st.lookups.Add(1)
	keys, err := block.ChainKeys(c.opts.Namespace, c.layout.BlockTokens, tokens)
	if err != nil {
		return Plan{Tokens: len(tokens)}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	p := Plan{Tokens: len(tokens), Keys: keys, Stored: make([]bool, len(keys))}
	if len(keys) == 0 {
		return p, nil
	}
	m, err := c.cl.Exists(ctx, c.opts.Namespace, keys)
	if err != nil {
		c.st.lookupErrors.Add(1)
		return p, fmt.Errorf("adapter: lookup: %w", err)
	}
	if len(m.Exists) == len(keys) {
		copy(p.Stored, m.Exists)
	}
	p.HitBlocks = min(m.PrefixLen, len(keys))
	p.Tiers = make([]string, p.HitBlocks, len(keys))
	var ssd []block.Key
	for i := range p.HitBlocks {
		if i < len(m.Tiers) {
			p.Tiers[i] = m.Tiers[i]
		}
		if p.Tiers[i] == "ssd" {
			ssd = append(ssd, keys[i])
		}
	}
	if c.opts.Cluster && p.HitBlocks < len(keys) {
		// The local node reads blocks other nodes hold on the engine's
		// behalf, so a longer prefix elsewhere is a hit too.
		nodes, err := c.cl.ClusterQuery(ctx, keys)
		if err != nil {
			c.st.lookupErrors.Add(1)
		}
		best := p.HitBlocks
		for _, n := range nodes {
			best = max(best, min(n.PrefixLen, len(keys)))
		}
		for i := p.HitBlocks; i < best; i++ {
			p.Tiers = append(p.Tiers, TierRemote)
		}
		if best > p.HitBlocks {
			c.st.clusterHits.Add(1)
		}
		p.HitBlocks = best
	}
	c.st.hitBlocks.Add(int64(p.HitBlocks))
	if len(ssd) > 0 && !c.opts.DisableWarm {
		select {
		case c.warm <- ssd:
		default:
			c.st.warmSkipped.Add(1)
		}
	}
	return p, nil
}

// warmer reads the layer groups of blocks found on SSD, in chain order, and throws
// the bytes away: the read itself is what makes the server bring them up to
// DRAM (its promotion policy decides), ahead of the engine's Load.
func (c *Connector) warmer() {
	for {
		select {
		case <-c.ctx.Done():
			return
		case keys := <-c.warm:
			for g := range c.layout.Groups() {
				lk := make([]block.Key, len(keys))
				for i, k := range keys {
					lk[i] = c.layout.GroupKey(k, g)
				}
				err := c.cl.GetBatch(c.ctx, c.opts.Namespace, lk, func(_ client.Frame, r io.Reader) error {
					_, err := io.Copy(io.Discard, r)
					return err
				})
				if err != nil {
					c.st.warmFa.Add(1)
					break
				}
			}
			c.st.warmed.Add(int64(len(keys)))
		}
	}
}

// getBatch reads keys (sizes[i] bytes expected of key i) through a shared-
// memory session when one is at hand, else over HTTP; fn sees the same
// frames either way, each verified against its CRC-32C once fn returns.
func (c *Connector) getBatch(ctx context.Context, keys []block.Key, sizes func(i int) int64, fn func(client.Frame, io.Reader) error) error {
	if c.shm != nil {
		if st := c.shm.get(ctx); st != nil {
			sz := make([]int64, len(keys))
			for i := range sz {
				sz[i] = sizes(i)
			}
			before := st.Counters().StagedBytes
			err := st.GetBatch(ctx, c.opts.Namespace, keys, sz, fn)
			c.st.shmStaged.Add(st.Counters().StagedBytes - before)
			c.shm.put(st)
			c.st.shmLoads.Add(1)
			return err
		}
	}
	if c.opts.Transfer != nil {
		return c.getByKey(ctx, keys, sizes, fn)
	}
	return c.cl.GetBatch(ctx, c.opts.Namespace, keys, fn)
}

// getInto has the node write items' blocks straight into their registered
// regions through a shared-memory session; fn sees each frame in order,
// already verified. done is false when nothing was asked (no session at
// hand, or the node refuses regions: the caller goes through the segment).
func (c *Connector) getInto(ctx context.Context, items []client.RegionItem, fn func(int, client.Frame) error) (done bool, err error) {
	if c.shm == nil || time.Now().UnixNano() < c.regionsOffUntil.Load() {
		return false, nil
	}
	st := c.shm.get(ctx)
	if st == nil {
		return false, nil
	}
	before := st.Counters().DirectBytes
	err = st.GetInto(ctx, c.opts.Namespace, items, fn)
	c.st.shmDirect.Add(st.Counters().DirectBytes - before)
	c.shm.put(st)
	if errors.Is(err, client.ErrRegionRefused) {
		c.regionsOffUntil.Store(time.Now().Add(shmRetry).UnixNano())
		c.opts.Logger.Warn("adapter: the node refused the target's registered memory; loading through the staging segment", "err", err)
		return false, nil
	}
	c.st.shmLoads.Add(1)
	c.st.shmRegionLoads.Add(1)
	return true, err
}

// putFrom stores items straight out of the save staging region when every
// one of them lies in it; otherwise (a commit record, no region, regions
// refused lately) it is PutBatch through the segment. A refused region
// comes back as ErrRegionRefused with nothing stored.
func (c *Connector) putFrom(ctx context.Context, st *client.Staging, items []client.Item) ([]client.ItemResult, error) {
	if time.Now().UnixNano() >= c.savesOffUntil.Load() {
		ris := make([]client.RegionItem, len(items))
		all := true
		for i, it := range items {
			if ris[i], all = c.stage.regionItem(it); !all {
				break
			}
		}
		if all {
			c.st.shmRegionSaves.Add(1)
			return st.PutFrom(ctx, c.opts.Namespace, ris)
		}
	}
	return st.PutBatch(ctx, c.opts.Namespace, items)
}

// getByKey is getBatch over the node's transfer service. Frames keep their
// order: from the first key the node does not hold itself, the rest go in
// one HTTP multi-get through the node, which reads them across the cluster.
func (c *Connector) getByKey(ctx context.Context, keys []block.Key, sizes func(i int) int64, fn func(client.Frame, io.Reader) error) error {
	var most int64
	for i := range keys {
		most = max(most, sizes(i))
	}
	c.st.transferLoads.Add(1)
	st, err := c.opts.Transfer.GetBlocks(ctx, c.opts.TransferAddr, keys, most)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.st.transferFallbacks.Add(1)
		c.opts.Logger.Debug("adapter: transfer service of the node", "err", err)
		return c.cl.GetBatch(ctx, c.opts.Namespace, keys, fn)
	}
	defer st.Close()
	for i, k := range keys {
		info, err := st.Next()
		if err != nil {
			return err
		}
		if !info.Found {
			st.Close()
			c.st.transferFallbacks.Add(1)
			return c.cl.GetBatch(ctx, c.opts.Namespace, keys[i:], fn)
		}
		cr := &block.CRCReader{R: st}
		if err := fn(client.Frame{Key: k, Checksum: info.Checksum, Length: info.Size}, cr); err != nil {
			return err
		}
		if cr.N == info.Size && cr.Sum != info.Checksum {
			return fmt.Errorf("%w: block %s: received crc32c %08x, the node holds %08x", client.ErrChecksum, k, cr.Sum, info.Checksum)
		}
	}
	return nil
}

// putBatch stores items through a shared-memory session when one is at
// hand, else over HTTP.
func (c *Connector) putBatch(ctx context.Context, items []client.Item) ([]client.ItemResult, error) {
	if c.shm != nil {
		if st := c.shm.get(ctx); st != nil {
			before := st.Counters()
			res, err := c.putFrom(ctx, st, items)
			if errors.Is(err, client.ErrRegionRefused) {
				c.savesOffUntil.Store(time.Now().Add(shmRetry).UnixNano())
				c.opts.Logger.Warn("adapter: the node refused the save staging memory; saving through the segment", "err", err)
				res, err = st.PutBatch(ctx, c.opts.Namespace, items)
			}
			after := st.Counters()
			c.st.shmStaged.Add(after.StagedBytes - before.StagedBytes)
			c.st.shmDirect.Add(after.DirectBytes - before.DirectBytes)
			c.shm.put(st)
			c.st.shmSaves.Add(1)
			return res, err
		}
	}
	return c.cl.PutBatch(ctx, c.opts.Namespace, items)
}
