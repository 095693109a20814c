package cluster

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/tier"
)

// What the server's public endpoints call. Each goes to the current
// leader's internal API (through HTTP even when this node leads, so there
// is one path to test).

// callLeader posts to the leader, once more if the leader changed under the
// call.
func (n *Node) callLeader(ctx context.Context, path string, in, out any) error {
	var err error
	for range 2 {
		li, ok := n.Leader()
		if !ok {
			return ErrNoLeader
		}
		m := Member{Name: li.Name, Addrs: Addrs{HTTP: li.HTTP}}
		if out == nil {
			out = &struct{}{}
		}
		if err = n.call(ctx, n.fast, m, path, in, out); err == nil {
			return nil
		}
		if errorIs(err, ErrUnreachable) {
			// Until its lease lapses a dead leader is still named: to the
			// caller that is no leader, and no address.
			return fmt.Errorf("%w: the leader %s did not answer", ErrNoLeader, li.Name)
		}
		if !isNotLeader(err) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", ErrNoLeader, err)
}

func isNotLeader(err error) bool {
	return err != nil && (errorIs(err, ErrNotLeader) || errorIs(err, ErrClosed))
}

// Holders returns, for each key, the nodes holding it and in which tiers.
func (n *Node) Holders(ctx context.Context, keys []block.Key) ([][]HolderInfo, error) {
	var resp holdersResponse
	if err := n.callLeader(ctx, "/internal/v1/locate", keysRequest{Keys: keys}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Holders) != len(keys) {
		return nil, fmt.Errorf("%w: %d answers for %d keys", ErrBadRequest, len(resp.Holders), len(keys))
	}
	return resp.Holders, nil
}

// Query returns, for every node holding the chain's first block, the
// longest prefix of chain it holds and its per-tier counts, longest first:
// the cluster-wide prefix match.
func (n *Node) Query(ctx context.Context, chain []block.Key) ([]Match, error) {
	var resp queryResponse
	if err := n.callLeader(ctx, "/internal/v1/query", keysRequest{Keys: chain}, &resp); err != nil {
		return nil, err
	}
	return resp.Nodes, nil
}

// SetReplicas changes key's desired replica count, cluster-wide
// (Mooncake's change_replica).
func (n *Node) SetReplicas(ctx context.Context, key block.Key, count int) error {
	if count < 1 || count > 255 {
		return fmt.Errorf("%w: replica count %d, want 1 to 255", ErrBadRequest, count)
	}
	n.desired.set(key, uint8(count))
	return n.callLeader(ctx, "/internal/v1/replicas", replicasRequest{Key: key, Count: count}, nil)
}

// NoteReplicas records the replica count a put asked for; the next report
// takes it to the leader, which places the extra replicas.
func (n *Node) NoteReplicas(key block.Key, count int) {
	if count < 1 || count > 255 {
		return
	}
	n.desired.set(key, uint8(count))
	n.rep.touch(key)
}

// Status is what a node knows of the cluster.
type Status struct {
	Cluster string     `json:"cluster"`
	Node    Member     `json:"node"`
	Leader  LeaderInfo `json:"leader"`
	// HasLeader is false while an election is under way.
	HasLeader bool     `json:"has_leader"`
	Members   []Member `json:"members"`
	// LeaderStatus is the leader's own view, when it answered.
	LeaderStatus *LeaderStatus `json:"leader_status,omitempty"`
	Counters     Counters      `json:"counters"`
}

// Counters are the node's cluster counters.
type Counters struct {
	Fetches       int64 `json:"fetches"`
	FetchFailures int64 `json:"fetch_failures"`
	FetchedBytes  int64 `json:"fetched_bytes"`
	Admitted      int64 `json:"admitted"`
	// Relayed counts blocks read from other nodes and relayed to a client
	// without a copy here (whole-block GETs not admitted).
	Relayed int64 `json:"relayed"`
	// Served counts blocks this node sent to readers on other nodes.
	Served int64 `json:"served"`
	// Published counts blocks registered with the leader before a put was
	// acknowledged; PublishFailures the registrations it did not take.
	Published       int64 `json:"published"`
	PublishFailures int64 `json:"publish_failures"`
	// Forgotten counts copies dropped because another node deleted them.
	Forgotten int64 `json:"forgotten"`
	// PeerAsks counts reads that asked the other nodes directly (no leader,
	// or its index incomplete); LocationHits blocks found through the
	// location cache.
	PeerAsks     int64 `json:"peer_asks"`
	LocationHits int64 `json:"location_hits"`
	// Locates counts calls to the leader to find blocks' holders; Fetches
	// (above) the read requests to holders, one per holder per read.
	Locates int64 `json:"locates"`
	Reports int64 `json:"reports"`
	Resyncs int64 `json:"resyncs"`
	// NameHits and NameMisses count LookupName answers.
	NameHits   int64 `json:"name_hits"`
	NameMisses int64 `json:"name_misses"`
	// BadRecords counts member records and campaigns in etcd that this
	// node ignored because the cluster token's MAC did not verify: a writer
	// to etcd that does not hold the token (docs/cluster.md).
	BadRecords int64 `json:"bad_records"`
}

// Counters returns the node's counters.
func (n *Node) Counters() Counters {
	s := &n.stats
	return Counters{
		Fetches: s.fetches.Load(), FetchFailures: s.fetchFailures.Load(), FetchedBytes: s.fetchedBytes.Load(),
		Admitted: s.admitted.Load(), Relayed: s.relayed.Load(), Served: s.served.Load(), Reports: s.reports.Load(), Resyncs: s.resyncs.Load(),
		NameHits: s.nameHits.Load(), NameMisses: s.nameMisses.Load(), BadRecords: s.badRecords.Load(),
		Published: s.published.Load(), PublishFailures: s.publishFailures.Load(), Forgotten: s.forgotten.Load(),
		PeerAsks: s.peerAsks.Load(), LocationHits: s.locCacheHits.Load(), Locates: s.locates.Load(),
	}
}

// Status returns the node's view of the cluster and, if the leader answers,
// the leader's.
func (n *Node) Status(ctx context.Context) Status {
	st := Status{Cluster: n.opts.Cluster, Members: n.Members(), Counters: n.Counters()}
	st.Leader, st.HasLeader = n.Leader()
	st.Node = Member{ID: n.id, Name: n.opts.NodeName, Addrs: n.addrs}
	for _, m := range st.Members {
		if m.ID == n.id {
			st.Node = m
		}
	}
	var ls LeaderStatus
	switch err := n.callLeader(ctx, "/internal/v1/status", struct{}{}, &ls); {
	case err == nil:
		st.LeaderStatus = &ls
	case errorIs(err, ErrNoLeader):
		// A leader that was killed or froze is still named in etcd until
		// its lease lapses; one that does not answer is no leader to the
		// caller, who sees the election coming rather than a dead node.
		st.HasLeader = false
	}
	return st
}

// SetStats sets what the node answers another node's MemberStats with:
// the server's own figures, so an operator reads every member's through
// one node. Until it is set the answer is not_found.
func (n *Node) SetStats(fn func() any) { n.statsFn.Store(&fn) }

func (n *Node) handleStats(w http.ResponseWriter, r *http.Request) {
	fn := n.statsFn.Load()
	if fn == nil {
		writeError(w, fmt.Errorf("%w: this node serves no figures", tier.ErrNotFound))
		return
	}
	writeJSON(w, (*fn)())
}

// MemberStats reads member id's figures (what its SetStats gives) into
// out. The request carries the cluster token and nothing of the caller's:
// a client's credentials never go to another node, and only members whose
// records verify (trust.go) are asked.
func (n *Node) MemberStats(ctx context.Context, id uint32, out any) error {
	m, ok := n.memberByID(id)
	if !ok {
		return fmt.Errorf("%w: node %d", ErrNotMember, id)
	}
	return n.call(ctx, n.client, m, "/internal/v1/stats", struct{}{}, out)
}

func (n *Node) tierNames(m index.TierMask) []string {
	var out []string
	for t := range index.MaxTiers {
		if m.Has(t) {
			out = append(out, tierLevelName(n.store, t))
		}
	}
	return out
}

func (n *Node) tierLevel(name string) int {
	for i, t := range n.store.Tiers() {
		if t.Name() == name {
			return i
		}
	}
	return -1
}

func sortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
}
