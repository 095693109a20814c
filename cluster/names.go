package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// Named blocks are the Redis front end's keys: a mutable name whose value
// is an immutable block, so the name cannot be derived from the block key
// the way a KV chain's can. Each node's front end knows only the names set
// through it; a node that misses a name asks the others (LookupName) and
// reads the block from the node that answered (ReadFrom).

// NameInfo is a node's answer for a name it holds.
type NameInfo struct {
	// Key is the block holding the name's value.
	Key block.Key `json:"key"`
	// Size is the value's length in bytes.
	Size int64 `json:"size"`
	// ExpireAtMs is the name's deadline in Unix milliseconds, 0 for none.
	ExpireAtMs int64 `json:"expire_at_ms,omitempty"`
	// Node is the id of the node that answered.
	Node uint32 `json:"node"`
	// Gen is the value's generation: a clock reading of the node that
	// wrote it, moved past every generation that node has heard of, so the
	// later of two writes of one name has the larger.
	Gen uint64 `json:"gen"`
}

// NameOp is a change another node's front end makes to a name this node
// may hold. Op "forget": drop the name if its generation is below Gen
// (another node wrote or deleted it later). Op "expire": set the name's
// deadline to ExpireAtMs (0: none; in the past: delete it) if its
// generation is Gen (the value the caller saw).
type NameOp struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Op         string `json:"op"`
	Gen        uint64 `json:"gen"`
	ExpireAtMs int64  `json:"expire_at_ms,omitempty"`
	// From is the id of the node that sent the op: of two writes of one
	// name at the same generation, the one from the larger id wins.
	From uint32 `json:"from"`
}

// NameOpResult is a node's answer to a NameOp. Done: the name was dropped
// or its deadline set. Newer: the node holds the name at a generation
// above Gen, so the caller's own write of it lost.
type NameOpResult struct {
	Done  bool `json:"done"`
	Newer bool `json:"newer"`
}

// NameOps applies NameOps to this node's names.
type NameOps func(NameOp) NameOpResult

// Name operations.
const (
	NameForget = "forget"
	NameExpire = "expire"
)

// NameLookup answers for the names this node holds: ok is false when it
// holds none by that name (or it expired).
type NameLookup func(namespace, name string) (info NameInfo, ok bool)

type nameRequest struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// maxNameLen bounds a looked-up name; the front end's keys are shorter.
const maxNameLen = 64 << 10

// SetNameOps installs the function that applies other nodes' changes to
// this node's names. Until it is set the node answers not found.
func (n *Node) SetNameOps(fn NameOps) { n.nameOps.Store(&fn) }

func (n *Node) handleNameOp(w http.ResponseWriter, r *http.Request) {
	var op NameOp
	if err := readJSON(r, &op); err != nil {
		writeError(w, err)
		return
	}
	if len(op.Name) > maxNameLen || op.Op != NameForget && op.Op != NameExpire || op.ExpireAtMs < 0 {
		writeError(w, fmt.Errorf("%w: name op %q on a name of %d bytes", ErrBadRequest, op.Op, len(op.Name)))
		return
	}
	fn := n.nameOps.Load()
	if fn == nil {
		writeError(w, tier.ErrNotFound)
		return
	}
	writeJSON(w, (*fn)(op))
}

// ForgetName tells every other member that namespace/name was written or
// deleted here at generation gen, waiting up to Options.PeerTimeout: each
// drops an older value it holds. dropped counts the members that held one;
// newer is true when one holds a value above gen, so the caller's write
// lost to a later one and the caller drops its own. A member that does not
// answer keeps what it holds (docs/cluster.md).
func (n *Node) ForgetName(ctx context.Context, namespace, name string, gen uint64) (dropped int, newer bool, err error) {
	op := NameOp{Namespace: namespace, Name: name, Op: NameForget, Gen: gen, From: n.id}
	var failed []string
	ctx, cancel := context.WithTimeout(ctx, n.opts.PeerTimeout)
	defer cancel()
	broadcast(ctx, n, "/internal/v1/name/op", op, func(m Member, res *NameOpResult, err error) {
		switch {
		case err != nil && !errors.Is(err, tier.ErrNotFound):
			failed = append(failed, m.Name)
		case err == nil && res.Done:
			dropped++
		case err == nil && res.Newer:
			newer = true
		}
	})
	if len(failed) > 0 {
		err = fmt.Errorf("%w: %v", ErrUnreachable, failed)
	}
	return dropped, newer, err
}

// ExpireName sets the deadline of namespace/name at generation gen on the
// node holding it (ExpireAtMs 0: none; in the past: delete it). It reports
// whether that node still held that value and changed it.
func (n *Node) ExpireName(ctx context.Context, node uint32, namespace, name string, gen uint64, expireAtMs int64) (bool, error) {
	m, ok := n.memberByID(node)
	if !ok {
		return false, fmt.Errorf("%w: node %d", ErrNotMember, node)
	}
	ctx, cancel := context.WithTimeout(ctx, n.opts.PeerTimeout)
	defer cancel()
	var res NameOpResult
	err := n.call(ctx, n.fast, m, "/internal/v1/name/op", NameOp{Namespace: namespace, Name: name, Op: NameExpire, Gen: gen, ExpireAtMs: expireAtMs, From: n.id}, &res)
	return res.Done, err
}

// SetNameLookup installs the function that answers other nodes' LookupName
// calls. Until it is set the node answers not found.
func (n *Node) SetNameLookup(fn NameLookup) { n.names.Store(&fn) }

func (n *Node) handleName(w http.ResponseWriter, r *http.Request) {
	var req nameRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	fn := n.names.Load()
	if fn == nil {
		writeError(w, tier.ErrNotFound)
		return
	}
	info, ok := (*fn)(req.Namespace, req.Name)
	if !ok {
		writeError(w, tier.ErrNotFound)
		return
	}
	info.Node = n.id
	writeJSON(w, info)
}

// LookupName asks every other member, at once, whether it holds name in
// namespace, and returns the first positive answer; tier.ErrNotFound when
// none does. A member that fails to answer within Options.PeerTimeout
// counts as not holding it. A name lives on the node that last
// wrote it (ForgetName drops it elsewhere), so the first answer is the one.
func (n *Node) LookupName(ctx context.Context, namespace, name string) (NameInfo, error) {
	if len(name) > maxNameLen {
		return NameInfo{}, fmt.Errorf("%w: name of %d bytes", ErrBadRequest, len(name))
	}
	var peers []Member
	for _, m := range n.Members() {
		if m.ID != n.id {
			peers = append(peers, m)
		}
	}
	if len(peers) == 0 {
		return NameInfo{}, tier.ErrNotFound
	}
	ctx, cancel := context.WithTimeout(ctx, n.opts.PeerTimeout)
	defer cancel() // the answers not waited for are abandoned
	type answer struct {
		info NameInfo
		err  error
	}
	answers := make(chan answer, len(peers))
	req := nameRequest{Namespace: namespace, Name: name}
	for _, m := range peers {
		go func() {
			var a answer
			a.err = n.call(ctx, n.fast, m, "/internal/v1/name", req, &a.info)
			answers <- a
		}()
	}
	var failed error
	for range peers {
		a := <-answers
		switch {
		case a.err == nil:
			n.stats.nameHits.Add(1)
			return a.info, nil
		case !errors.Is(a.err, tier.ErrNotFound):
			failed = a.err
		}
	}
	n.stats.nameMisses.Add(1)
	if failed != nil && ctx.Err() == nil {
		n.log.Debug("cluster: looking up a name", "err", failed)
	}
	return NameInfo{}, tier.ErrNotFound
}

// ReadFrom reads a block from the given node over the transfer service,
// checksum verified, and does not keep it: a named block may be replaced
// on its node at any time, so a copy here would go stale unseen.
func (n *Node) ReadFrom(ctx context.Context, key block.Key, node uint32) (*tier.Handle, error) {
	if n.closed.Load() {
		return nil, tier.ErrNotFound
	}
	start := time.Now()
	h, _, err := n.fetchFrom(ctx, key, node)
	if err != nil {
		n.stats.fetchFailures.Add(1)
		return nil, err
	}
	n.log.Debug("cluster: read a named block", "key", key, "node", node, "took", time.Since(start))
	return h, nil
}
