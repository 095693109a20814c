package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/tcp"
	"github.com/yuebing/yuebing/tier"
)

// Member is a registered node, as its key in etcd records it.
type Member struct {
	ID    uint32     `json:"id"`
	Name  string     `json:"name"`
	Addrs Addrs      `json:"addrs"`
	Tiers []TierInfo `json:"tiers"`
	// Started is when the node registered this membership.
	Started time.Time `json:"started"`
}

// TierInfo is one tier of a member's store.
type TierInfo struct {
	Name     string `json:"name"`
	Capacity int64  `json:"capacity_bytes"`
}

// LeaderInfo says which node leads and since when.
type LeaderInfo struct {
	ID   uint32 `json:"id"`
	Name string `json:"name"`
	HTTP string `json:"http"`
	// Term is the etcd revision at which the leader was elected: it grows
	// with every election, so it tells a stale leader from the current one.
	Term int64 `json:"term"`
}

// Node is one node's membership of a cluster: its registration in etcd, its
// part in leader election, the reports of its blocks to the leader, reads
// of blocks held elsewhere (it is the store's RemoteReader), serving its
// blocks to other nodes over the transfer service, and, while it is the
// leader, the global index and the replication driver. It is safe for
// concurrent use.
type Node struct {
	opts   Options
	store  *tier.Hierarchy
	log    *slog.Logger
	engine *rdma.Engine
	client *http.Client
	// fast is the client of reads, registrations and deletes: a peer that
	// does not start answering within PeerTimeout is passed over.
	fast *http.Client
	pfx  string // etcd key prefix, ending in '/'
	// recordKey signs and checks member records and campaigns (trust.go).
	recordKey []byte
	// requestKey signs and checks internal requests (trust.go).
	requestKey []byte

	etcd    *clientv3.Client
	id      uint32
	addrs   Addrs
	started atomic.Bool

	rep     *reporter
	desired desiredTable
	recent  *lru.Cache[block.Key, struct{}]
	// locs caches where blocks read from other nodes were found, so a
	// repeated read skips the leader; a holder that no longer has the
	// block, or a delete, drops the entry.
	locs *lru.Cache[block.Key, []uint32]
	// tomb remembers recent deletes (here or on another node), so a copy
	// fetched before one is not kept after it.
	tomb    *lru.Cache[block.Key, time.Time]
	fetches *semaphore.Weighted // MaxFetches
	bytes   *semaphore.Weighted // MaxFetchBytes

	lead    atomic.Pointer[leader] // set while this node leads
	names   atomic.Pointer[NameLookup]
	nameOps atomic.Pointer[NameOps]
	statsFn atomic.Pointer[func() any]
	replica atomic.Pointer[ReplicaAccount]

	mu struct {
		sync.Mutex
		members map[uint32]Member
		leader  LeaderInfo
		hasLead bool
	}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
	stats  stats
}

type stats struct {
	fetches, fetchFailures, fetchedBytes, admitted atomic.Int64
	relayed                                        atomic.Int64
	reports, resyncs                               atomic.Int64
	served, published, publishFailures, forgotten  atomic.Int64
	peerAsks, locCacheHits, locates                atomic.Int64
	nameHits, nameMisses                           atomic.Int64
	badRecords                                     atomic.Int64
	serving                                        atomic.Int64 // reads being answered
}

// New prepares a node: it validates opts and starts the transfer service on
// opts.TransferListen. It does not contact etcd yet; Start does.
func New(opts Options, store *tier.Hierarchy) (*Node, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("cluster: a store is required")
	}
	// A peer that does not answer within PeerTimeout is passed over, on
	// the transfer service as on the internal API.
	tr, err := tcp.New(tcp.Options{
		Topology:    rdma.Topology{rdma.AnyLocation: {Preferred: []string{opts.TransferListen}}},
		DialTimeout: opts.PeerTimeout, IOTimeout: opts.PeerTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: transfer service: %w", err)
	}
	engine, err := rdma.New(rdma.Options{ClusterToken: opts.Token, Logger: opts.Logger}, tr)
	if err != nil {
		return nil, fmt.Errorf("cluster: transfer service on %s: %w", opts.TransferListen, err)
	}
	recent, _ := lru.New[block.Key, struct{}](opts.RecentFetches)
	locs, _ := lru.New[block.Key, []uint32](opts.LocationCache)
	tomb, _ := lru.New[block.Key, time.Time](opts.RecentFetches)
	n := &Node{
		opts:   opts,
		store:  store,
		log:    opts.Logger.With("node", opts.NodeName),
		engine: engine,
		client: &http.Client{Transport: &http.Transport{
			// A holder that died is still listed until its lease lapses: a
			// short dial timeout makes trying it cheap before the next one.
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 32,
			IdleConnTimeout:     90 * time.Second,
		}},
		fast: &http.Client{Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: opts.PeerTimeout, KeepAlive: 30 * time.Second}).DialContext,
			ResponseHeaderTimeout: opts.PeerTimeout,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
		}},
		pfx:        "/yuebing/" + opts.Cluster + "/",
		recordKey:  deriveKey(opts.Token, purposeRecords),
		requestKey: deriveKey(opts.Token, purposeRequests),
		recent:     recent,
		locs:       locs,
		tomb:       tomb,
		fetches:    semaphore.NewWeighted(int64(opts.MaxFetches)),
		bytes:      semaphore.NewWeighted(int64(opts.MaxFetchBytes)),
	}
	n.mu.members = map[uint32]Member{}
	n.desired.init(opts.MaxPending * 4)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.rep = newReporter(n)
	engine.ServeBlocks(n)
	return n, nil
}

// TransferAddr returns the address the transfer service listens on.
func (n *Node) TransferAddr() string { return n.engine.Addr() }

// ID returns the node's id; valid after Start.
func (n *Node) ID() uint32 { return n.id }

// Name returns the node's name.
func (n *Node) Name() string { return n.opts.NodeName }

// Start joins the cluster: it connects to etcd (failing after
// Options.DialTimeout), takes the node's id, registers it under a lease with
// the given addresses (Transfer defaults to the transfer service's), and
// starts campaigning, watching members and reporting blocks. From then on
// the store's reads fall back to other nodes.
func (n *Node) Start(ctx context.Context, addrs Addrs) error {
	if addrs.Transfer == "" {
		addrs.Transfer = n.engine.Addr()
	}
	if addrs.HTTP == "" {
		return errors.New("cluster: Start needs the node's HTTP address")
	}
	n.addrs = addrs
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   n.opts.Endpoints,
		DialTimeout: n.opts.DialTimeout,
		Username:    n.opts.EtcdUsername,
		Password:    n.opts.EtcdPassword,
		Logger:      zap.NewNop(),
		Context:     n.ctx,
	})
	if err != nil {
		return fmt.Errorf("cluster: etcd %s: %w", strings.Join(n.opts.Endpoints, ","), err)
	}
	n.etcd = cli
	ictx, cancel := context.WithTimeout(ctx, n.opts.DialTimeout)
	defer cancel()
	id, err := n.assignID(ictx)
	if err != nil {
		cli.Close()
		n.etcd = nil
		return fmt.Errorf("cluster: joining %q through etcd %s: %w", n.opts.Cluster, strings.Join(n.opts.Endpoints, ","), err)
	}
	n.id = id
	if err := n.checkNameFree(ictx); err != nil {
		cli.Close()
		n.etcd = nil
		return err
	}
	n.log = n.log.With("id", id)
	n.store.OnChange(n.rep.changed)
	n.store.OnAccess(n.rep.accessed)
	n.store.SetRemote(n)
	n.started.Store(true)
	n.wg.Go(n.watchMembers)
	n.wg.Go(n.watchLeader)
	n.wg.Go(n.sessionLoop)
	n.wg.Go(n.rep.loop)
	return nil
}

// Close leaves the cluster: it resigns leadership, revokes the node's lease
// (so the leader repairs at once instead of after the lease's TTL), stops
// every loop and the transfer service. The store stays open.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	if n.started.Load() {
		n.store.SetRemote(nil)
	}
	n.cancel()
	n.wg.Wait()
	err := n.engine.Close()
	if n.etcd != nil {
		err = errors.Join(err, n.etcd.Close())
	}
	n.client.CloseIdleConnections()
	n.fast.CloseIdleConnections()
	return err
}

func (n *Node) key(parts ...string) string { return n.pfx + strings.Join(parts, "/") }

// assignID returns the node's id: the one its name already has, or the
// smallest free one, taken in one transaction with the name so that two
// nodes never share an id and a restarted node gets its own back.
func (n *Node) assignID(ctx context.Context) (uint32, error) {
	nameKey := n.key("names", n.opts.NodeName)
	for {
		resp, err := n.etcd.Get(ctx, nameKey)
		if err != nil {
			return 0, err
		}
		if len(resp.Kvs) > 0 {
			id, err := strconv.ParseUint(string(resp.Kvs[0].Value), 10, 32)
			if err != nil || id >= uint64(n.opts.MaxNodes) {
				return 0, fmt.Errorf("cluster: etcd key %s holds %q, not a node id below %d", nameKey, resp.Kvs[0].Value, n.opts.MaxNodes)
			}
			return uint32(id), nil
		}
		ids, err := n.etcd.Get(ctx, n.key("ids")+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return 0, err
		}
		used := make(map[uint64]bool, len(ids.Kvs))
		for _, kv := range ids.Kvs {
			if id, err := strconv.ParseUint(strings.TrimPrefix(string(kv.Key), n.key("ids")+"/"), 10, 32); err == nil {
				used[id] = true
			}
		}
		id := uint64(0)
		for used[id] {
			id++
		}
		if id >= uint64(n.opts.MaxNodes) {
			return 0, fmt.Errorf("%w: %d names registered", ErrIDsExhausted, len(used))
		}
		idKey := n.key("ids", strconv.FormatUint(id, 10))
		txn, err := n.etcd.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(nameKey), "=", 0), clientv3.Compare(clientv3.CreateRevision(idKey), "=", 0)).
			Then(clientv3.OpPut(nameKey, strconv.FormatUint(id, 10)), clientv3.OpPut(idKey, n.opts.NodeName)).
			Commit()
		if err != nil {
			return 0, err
		}
		if txn.Succeeded {
			return uint32(id), nil
		}
		// Another node took the id or this name meanwhile: look again.
	}
}

// checkNameFree refuses to start while another live node is registered
// under this node's name: two nodes with one name would share an id, and
// each would replace the other's blocks in the leader's index. A record
// left by an earlier run of this node (killed, its lease not yet lapsed)
// is told apart by asking its HTTP address: a live node answers.
func (n *Node) checkNameFree(ctx context.Context) error {
	resp, err := n.etcd.Get(ctx, n.key("members", strconv.FormatUint(uint64(n.id), 10)))
	if err != nil {
		return fmt.Errorf("cluster: reading the member record of %q: %w", n.opts.NodeName, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	// A record not signed with the token is no node's: it cannot hold
	// the name, and its address is not asked anything.
	var m Member
	if n.unseal(string(resp.Kvs[0].Key), resp.Kvs[0].Value, &m) != nil || m.Addrs.HTTP == "" || m.Addrs.HTTP == n.addrs.HTTP {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, n.opts.PeerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, "http://"+m.Addrs.HTTP+"/healthz", nil)
	if err != nil {
		return nil
	}
	hr, err := n.fast.Do(req)
	if err != nil {
		return nil // not answering: an earlier run of this node
	}
	hr.Body.Close()
	return fmt.Errorf("%w: a live node named %q is registered in cluster %q (http %s, transfer %s, started %s); give this node another --node-name or stop that one",
		ErrNameInUse, n.opts.NodeName, n.opts.Cluster, m.Addrs.HTTP, m.Addrs.Transfer, m.Started.Format(time.RFC3339))
}

func (n *Node) member() Member {
	m := Member{ID: n.id, Name: n.opts.NodeName, Addrs: n.addrs, Started: time.Now().UTC()}
	for _, st := range n.store.Stats().Tiers {
		m.Tiers = append(m.Tiers, TierInfo{Name: st.Name, Capacity: st.Capacity})
	}
	return m
}

// sessionLoop keeps the node registered: one etcd session (a lease kept
// alive) at a time, the member key under it, and a campaign for leadership.
// When the session is lost (etcd unreachable for longer than the lease's
// TTL) the node leaves the leadership, registers anew and resends its full
// state.
func (n *Node) sessionLoop() {
	backoff := 100 * time.Millisecond
	for n.ctx.Err() == nil {
		if err := n.session(); err != nil && n.ctx.Err() == nil {
			n.log.Warn("cluster: etcd session ended; registering again", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-n.ctx.Done():
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

func (n *Node) session() error {
	ttl := max(1, int((n.opts.LeaseTTL+time.Second-1)/time.Second))
	sess, err := concurrency.NewSession(n.etcd, concurrency.WithTTL(ttl), concurrency.WithContext(n.ctx))
	if err != nil {
		return err
	}
	defer func() {
		// Revoking the lease removes the member key and the campaign at
		// once: the others need not wait out the TTL.
		ctx, cancel := context.WithTimeout(context.Background(), n.opts.DialTimeout)
		defer cancel()
		if _, err := n.etcd.Revoke(ctx, sess.Lease()); err != nil {
			sess.Orphan()
		}
	}()
	mkey := n.key("members", strconv.FormatUint(uint64(n.id), 10))
	val, err := n.seal(mkey, n.member())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.opts.DialTimeout)
	_, err = n.etcd.Put(ctx, mkey, val, clientv3.WithLease(sess.Lease()))
	cancel()
	if err != nil {
		return fmt.Errorf("registering: %w", err)
	}
	n.log.Info("cluster: registered", "cluster", n.opts.Cluster, "lease_ttl", n.opts.LeaseTTL)
	n.rep.resync() // a new session: the leader may have dropped us

	cctx, stop := context.WithCancel(n.ctx)
	defer stop()
	elected := make(chan *concurrency.Election, 1)
	var campaign sync.WaitGroup
	defer campaign.Wait()
	defer stop()
	campaign.Go(func() {
		e := concurrency.NewElection(sess, n.key("election"))
		li, err := n.seal(n.key("election"), LeaderInfo{ID: n.id, Name: n.opts.NodeName, HTTP: n.addrs.HTTP})
		if err != nil {
			return
		}
		if err := e.Campaign(cctx, li); err != nil {
			return
		}
		elected <- e
	})
	select {
	case <-sess.Done():
		return errors.New("lease lost")
	case <-n.ctx.Done():
		return nil
	case e := <-elected:
		l, err := newLeader(n, e.Rev())
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), n.opts.DialTimeout)
			defer cancel()
			_ = e.Resign(ctx)
			return err
		}
		n.lead.Store(l)
		n.log.Info("cluster: elected leader", "term", e.Rev())
		defer func() {
			n.lead.Store(nil)
			l.close()
			ctx, cancel := context.WithTimeout(context.Background(), n.opts.DialTimeout)
			defer cancel()
			_ = e.Resign(ctx)
			n.log.Info("cluster: no longer leader", "term", e.Rev())
		}()
		select {
		case <-sess.Done():
			return errors.New("lease lost while leading")
		case <-n.ctx.Done():
			return nil
		}
	}
}

// watchPrefix calls load with every key under prefix, then again after each
// change, until the node closes. It resumes after errors and compactions.
func (n *Node) watchPrefix(prefix string, opts []clientv3.OpOption, load func(*clientv3.GetResponse)) {
	for n.ctx.Err() == nil {
		resp, err := n.etcd.Get(n.ctx, prefix, append([]clientv3.OpOption{clientv3.WithPrefix()}, opts...)...)
		if err != nil {
			select {
			case <-time.After(200 * time.Millisecond):
			case <-n.ctx.Done():
			}
			continue
		}
		load(resp)
		wctx, cancel := context.WithCancel(n.ctx)
		wch := n.etcd.Watch(clientv3.WithRequireLeader(wctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		for wr := range wch {
			if wr.Err() != nil || wr.Canceled {
				break
			}
			if len(wr.Events) > 0 {
				break // load again: simpler than applying events, and rare
			}
		}
		cancel()
	}
}

// rejectOnce logs and counts a record the node ignores, once per version
// of it: the watches reload every record at each change, and an ignored
// one would otherwise be counted again every time. seen holds the keys
// and revisions ignored at the last load; next collects this load's.
func (n *Node) rejectOnce(seen, next map[string]int64, key []byte, rev int64, err error) {
	next[string(key)] = rev
	if seen[string(key)] == rev {
		return
	}
	n.stats.badRecords.Add(1)
	n.log.Warn("cluster: ignoring a record in etcd", "key", string(key), "revision", rev, "err", err)
}

func (n *Node) watchMembers() {
	pfx := n.key("members") + "/"
	var seen map[string]int64
	n.watchPrefix(pfx, nil, func(resp *clientv3.GetResponse) {
		members := make(map[uint32]Member, len(resp.Kvs))
		next := map[string]int64{}
		for _, kv := range resp.Kvs {
			var m Member
			err := n.unseal(string(kv.Key), kv.Value, &m)
			if err == nil && strings.TrimPrefix(string(kv.Key), pfx) != strconv.FormatUint(uint64(m.ID), 10) {
				err = fmt.Errorf("%w: %s names node id %d", ErrBadRecord, kv.Key, m.ID)
			}
			if err != nil {
				n.rejectOnce(seen, next, kv.Key, kv.ModRevision, err)
				continue
			}
			members[m.ID] = m
		}
		seen = next
		n.mu.Lock()
		old := n.mu.members
		n.mu.members = members
		n.mu.Unlock()
		if l := n.lead.Load(); l != nil {
			for id := range old {
				if _, ok := members[id]; !ok {
					l.nodeGone(id)
				}
			}
		}
	})
}

func (n *Node) watchLeader() {
	var seen map[string]int64
	n.watchPrefix(n.key("election")+"/", []clientv3.OpOption{
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1),
	}, func(resp *clientv3.GetResponse) {
		// The first campaign is the leader's. One not signed with the
		// token names no leader: its address gets no reports, no lookups
		// and no token.
		var li LeaderInfo
		ok := false
		next := map[string]int64{}
		if len(resp.Kvs) > 0 {
			kv := resp.Kvs[0]
			if err := n.unseal(n.key("election"), kv.Value, &li); err != nil {
				li = LeaderInfo{}
				n.rejectOnce(seen, next, kv.Key, kv.ModRevision, err)
			} else {
				ok, li.Term = true, kv.CreateRevision
			}
		}
		seen = next
		n.mu.Lock()
		changed := n.mu.hasLead != ok || n.mu.leader != li
		n.mu.leader, n.mu.hasLead = li, ok
		n.mu.Unlock()
		if changed {
			n.rep.kickNow()
		}
	})
}

// Leader returns the current leader, if one is known.
func (n *Node) Leader() (LeaderInfo, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.leader, n.mu.hasLead
}

// Members returns the registered nodes, by id.
func (n *Node) Members() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Member, 0, len(n.mu.members))
	for _, m := range n.mu.members {
		out = append(out, m)
	}
	sortMembers(out)
	return out
}

func (n *Node) memberByID(id uint32) (Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m, ok := n.mu.members[id]
	return m, ok
}

// nameOf returns a node's name, or node-ID when it is not a member.
func (n *Node) nameOf(id uint32) string {
	if m, ok := n.memberByID(id); ok {
		return m.Name
	}
	return "node-" + strconv.FormatUint(uint64(id), 10)
}
