package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/replicate"
)

// leader is the leader's role, alive for one term: the global index built
// from the nodes' reports, and the replication core with its driver. A new
// term starts both empty; the nodes' full states fill the index within a
// report or two, and the replica counts come with them.
type leader struct {
	n    *Node
	term int64
	g    *index.Global
	drv  *replicate.Driver

	mu struct {
		sync.Mutex
		// nodes records, per node, how far its state has come in this
		// term: absent, syncing (a full state under way), or synced.
		nodes map[uint32]syncState
	}
}

type syncState uint8

const (
	syncing syncState = iota + 1
	synced
)

func newLeader(n *Node, term int64) (*leader, error) {
	l := &leader{n: n, term: term, g: index.NewGlobal(index.GlobalOptions{MaxNodes: n.opts.MaxNodes})}
	l.mu.nodes = map[uint32]syncState{}
	core, err := replicate.NewCore(n.opts.Replication, l.g)
	if err != nil {
		return nil, fmt.Errorf("cluster: leader: %w", err)
	}
	l.drv = replicate.NewDriver(core, executor{l}, replicate.DriverOptions{
		Interval: n.opts.ReplicationInterval,
		Logger:   n.log.With("role", "leader"),
	})
	return l, nil
}

func (l *leader) close() { l.drv.Close() }

// apply takes one report.
func (l *leader) apply(r *report) error {
	if _, ok := l.n.memberByID(r.Node); !ok {
		return fmt.Errorf("%w: node %d", ErrNotMember, r.Node)
	}
	l.mu.Lock()
	state := l.mu.nodes[r.Node]
	if r.full() {
		state = syncing
		l.mu.nodes[r.Node] = syncing
	}
	l.mu.Unlock()
	if state == 0 {
		return fmt.Errorf("%w: node %d has not sent its full state in term %d", ErrResync, r.Node, l.term)
	}
	if r.full() {
		// The first part replaces whatever the index had; later parts add.
		held := make([]index.Held, 0, len(r.Records))
		for _, rec := range r.Records {
			for t := range index.MaxTiers {
				if rec.Tiers.Has(t) {
					held = append(held, index.Held{Key: rec.Key, Tier: uint8(t)})
				}
			}
		}
		if err := l.g.ReplaceNode(r.Node, held); err != nil {
			return fmt.Errorf("%w: %v", ErrBadReport, err)
		}
		// A node that was up keeps its place; its tracked blocks learn
		// their holders again below.
	} else if err := l.applyDeltas(r); err != nil {
		return err
	}
	now := time.Now()
	for _, rec := range r.Records {
		if rec.Tiers != 0 {
			// Count and pin first: they start tracking the block, so the
			// Added below records its size (copy targets reserve it).
			if rec.Desired > 0 {
				l.drv.Step(replicate.SetReplicas{Key: rec.Key, Count: int(rec.Desired)})
			}
			if pin := time.Unix(int64(rec.PinnedUntil), 0); rec.PinnedUntil != 0 && pin.After(now) {
				l.drv.Step(replicate.Pin{Key: rec.Key, Until: pin})
			}
			for t := range index.MaxTiers {
				if rec.Tiers.Has(t) {
					l.drv.Step(replicate.Added{Node: r.Node, Key: rec.Key, Tier: uint8(t), Size: int64(min(rec.Size, 1<<62))})
				}
			}
		}
	}
	if len(r.Hits) > 0 {
		h := replicate.Hits{Node: r.Node, Keys: make([]block.Key, len(r.Hits)), Counts: make([]uint32, len(r.Hits))}
		for i, x := range r.Hits {
			h.Keys[i], h.Counts[i] = x.Key, x.Count
		}
		l.drv.Step(h)
		// A block that turned hot may be one the core never saw added:
		// restate its holders with the size the reader saw, so copy
		// targets reserve the right room.
		var buf []index.Holder
		for _, x := range r.Hits {
			if x.Size == 0 {
				continue
			}
			buf = l.g.AppendHolders(buf[:0], x.Key)
			for _, hd := range buf {
				l.drv.Step(replicate.Added{Node: hd.Node, Key: x.Key, Tier: uint8(max(hd.Tiers.Top(), 0)), Size: int64(min(x.Size, 1<<62))})
			}
		}
	}
	if r.Flags&flagFullEnd != 0 {
		l.mu.Lock()
		l.mu.nodes[r.Node] = synced
		l.mu.Unlock()
		state = synced
	}
	if state == synced {
		// Every report refreshes the node's figures; the first after its
		// full state brings it into placement.
		l.drv.Step(replicate.NodeUp{Node: r.Node, Capacity: int64(min(r.Capacity, 1<<62)), Free: int64(min(r.Free, 1<<62)), Load: r.Load})
	}
	return nil
}

// applyDeltas diffs each record against the index: records state what the
// node holds now.
func (l *leader) applyDeltas(r *report) error {
	var changes []index.Change
	for _, rec := range r.Records {
		old := l.g.NodeTiers(r.Node, rec.Key)
		for t := range index.MaxTiers {
			was, is := old.Has(t), rec.Tiers.Has(t)
			if was == is {
				continue
			}
			changes = append(changes, index.Change{Key: rec.Key, Tier: uint8(t), Added: is})
			if !is {
				l.drv.Step(replicate.Removed{Node: r.Node, Key: rec.Key, Tier: uint8(t)})
			}
		}
	}
	if err := l.g.Apply(r.Node, changes); err != nil {
		return fmt.Errorf("%w: %v", ErrBadReport, err)
	}
	return nil
}

// nodeGone handles a node whose membership ended: its blocks leave the
// index and the core repairs what fell below its replica count.
func (l *leader) nodeGone(id uint32) {
	l.mu.Lock()
	delete(l.mu.nodes, id)
	l.mu.Unlock()
	l.g.RemoveNode(id)
	l.drv.Step(replicate.NodeDown{Node: id})
	l.n.log.Info("cluster: node left; repairing its blocks", "gone", id)
}

// complete reports whether every member has sent its full state in this
// term: only then does a key the index lacks mean no node holds it.
func (l *leader) complete() bool {
	members := l.n.Members()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range members {
		if l.mu.nodes[m.ID] != synced {
			return false
		}
	}
	return true
}

// HolderInfo is a node holding a block, for answers.
type HolderInfo struct {
	Node  uint32   `json:"node"`
	Name  string   `json:"name"`
	Tiers []string `json:"tiers"`
}

func (l *leader) holders(keys []block.Key) [][]HolderInfo {
	out := make([][]HolderInfo, len(keys))
	var buf []index.Holder
	for i, k := range keys {
		buf = l.g.AppendHolders(buf[:0], k)
		out[i] = make([]HolderInfo, 0, len(buf))
		for _, h := range buf {
			out[i] = append(out[i], HolderInfo{Node: h.Node, Name: l.n.nameOf(h.Node), Tiers: l.n.tierNames(h.Tiers)})
		}
	}
	return out
}

// Match is one node's share of a prefix query: the longest prefix of the
// chain it holds, and how many of those blocks have their fastest copy in
// each tier.
type Match struct {
	Node      uint32         `json:"node"`
	Name      string         `json:"name"`
	PrefixLen int            `json:"prefix_len"`
	Tiers     map[string]int `json:"tiers"`
}

func (l *leader) query(chain []block.Key) []Match {
	ms := l.g.Query(chain)
	out := make([]Match, 0, len(ms))
	for _, m := range ms {
		x := Match{Node: m.Node, Name: l.n.nameOf(m.Node), PrefixLen: m.PrefixLen, Tiers: map[string]int{}}
		for t, c := range m.PerTier {
			if c > 0 {
				x.Tiers[tierLevelName(l.n.store, t)] = c
			}
		}
		out = append(out, x)
	}
	return out
}

// setReplicas changes a block's desired count and tells its holders, so
// the count survives this leader (a new one learns it from their reports).
func (l *leader) setReplicas(ctx context.Context, key block.Key, count int) error {
	if count < 1 || count > 255 {
		return fmt.Errorf("%w: replica count %d, want 1 to 255", ErrBadRequest, count)
	}
	if err := l.drv.Step(replicate.SetReplicas{Key: key, Count: count}); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	for _, h := range l.g.Holders(key) {
		m, ok := l.n.memberByID(h.Node)
		if !ok {
			continue
		}
		if err := l.n.call(ctx, l.n.client, m, "/internal/v1/desired", replicasRequest{Key: key, Count: count, Term: l.term}, nil); err != nil {
			l.n.log.Warn("cluster: telling a holder a replica count", "holder", m.Name, "err", err)
		}
	}
	return nil
}

// LeaderStatus is the leader's view, for operators and benchmarks.
type LeaderStatus struct {
	Term        int64           `json:"term"`
	Blocks      int             `json:"blocks"`
	IndexBytes  int64           `json:"index_bytes"`
	Nodes       []uint32        `json:"nodes"`
	Replication replicate.Stats `json:"replication"`
}

func (l *leader) status() LeaderStatus {
	st := LeaderStatus{Term: l.term, Blocks: l.g.Len(), IndexBytes: l.g.MemoryBytes(), Nodes: l.g.Nodes()}
	l.drv.Inspect(func(c *replicate.Core) { st.Replication = c.Stats() })
	return st
}

// executor carries out the core's actions by telling nodes what to do on
// the internal API: a Copy asks the target to fetch the block from the
// source over the transfer service and keep it; a Drop asks a node to
// delete its copy, and is refused here if the index shows no other copy.
type executor struct{ l *leader }

func (e executor) Copy(ctx context.Context, key block.Key, from, to uint32) error {
	m, ok := e.l.n.memberByID(to)
	if !ok {
		return fmt.Errorf("%w: node %d", ErrNotMember, to)
	}
	var desired uint8
	e.l.drv.Inspect(func(c *replicate.Core) {
		if b, ok := c.Block(time.Now(), key); ok && b.Desired > 1 {
			desired = uint8(min(b.Desired, 255))
		}
	})
	return e.l.n.call(ctx, e.l.n.client, m, "/internal/v1/fetch", fetchRequest{Key: key, From: from, Term: e.l.term, Desired: desired}, nil)
}

func (e executor) Drop(ctx context.Context, key block.Key, node uint32) error {
	holders := e.l.g.Holders(key)
	others := 0
	for _, h := range holders {
		if h.Node != node {
			if _, ok := e.l.n.memberByID(h.Node); ok {
				others++
			}
		}
	}
	if others == 0 {
		return fmt.Errorf("%w: %s", ErrLastCopy, key)
	}
	m, ok := e.l.n.memberByID(node)
	if !ok {
		return fmt.Errorf("%w: node %d", ErrNotMember, node)
	}
	return e.l.n.call(ctx, e.l.n.client, m, "/internal/v1/drop", dropRequest{Key: key, Term: e.l.term}, nil)
}
