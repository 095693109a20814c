package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/httperr"
	"github.com/yuebing/yuebing/tier"
)

// The internal API is how nodes talk to each other: plain HTTP on each
// node's HTTP listener under /internal/v1, authenticated with the cluster
// token, which is separate from the tenants' tokens: nodes sign their
// requests with it (trust.go), tools may send Authorization: Bearer TOKEN. Reports are binary (see report.go); everything else is small
// JSON. docs/cluster.md lists the endpoints.

// maxRequestKeys bounds the keys of one request of the internal API.
const maxRequestKeys = 1024

// Request and answer bodies.
type (
	keysRequest struct {
		Keys []block.Key `json:"keys"`
	}
	// fetchRequest tells a node to copy a block from another node and keep
	// it: the replication driver's Copy.
	fetchRequest struct {
		Key     block.Key `json:"key"`
		From    uint32    `json:"from"`
		Term    int64     `json:"term"`
		Desired uint8     `json:"desired,omitempty"`
	}
	// dropRequest tells a node to delete its copy: the driver's Drop.
	dropRequest struct {
		Key  block.Key `json:"key"`
		Term int64     `json:"term"`
	}
	replicasRequest struct {
		Key   block.Key `json:"key"`
		Count int       `json:"count"`
		Term  int64     `json:"term,omitempty"`
	}
	holdersResponse struct {
		Holders [][]HolderInfo `json:"holders"`
		// Complete is true when every member's full state is in the
		// index: a key without holders is then held nowhere.
		Complete bool `json:"complete"`
	}
	queryResponse struct {
		Nodes []Match `json:"nodes"`
	}
)

// maxJSON bounds an internal JSON body: 4096 keys in hex and change.
const maxJSON = 1 << 20

// maxReportBody bounds a report body.
const maxReportBody = reportHeaderSize + MaxReportRecords*(recordSize+hitSize) + trailerSize

// Handler returns the internal API; the server mounts it at /internal/.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /internal/v1/report", n.handleReport)
	mux.HandleFunc("POST /internal/v1/locate", n.handleLocate)
	mux.HandleFunc("POST /internal/v1/query", n.handleQuery)
	mux.HandleFunc("POST /internal/v1/replicas", n.handleReplicas)
	mux.HandleFunc("POST /internal/v1/status", n.handleLeaderStatus)
	mux.HandleFunc("POST /internal/v1/fetch", n.handleFetch)
	mux.HandleFunc("POST /internal/v1/drop", n.handleDrop)
	mux.HandleFunc("POST /internal/v1/desired", n.handleDesired)
	mux.HandleFunc("POST /internal/v1/name", n.handleName)
	mux.HandleFunc("POST /internal/v1/name/op", n.handleNameOp)
	mux.HandleFunc("POST /internal/v1/has", n.handleHas)
	mux.HandleFunc("POST /internal/v1/forget", n.handleForget)
	mux.HandleFunc("POST /internal/v1/hot", n.handleHot)
	mux.HandleFunc("POST /internal/v1/stats", n.handleStats)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("%w: no internal route %s %s", tier.ErrNotFound, r.Method, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := n.authenticate(r, time.Now(), max(maxJSON, maxReportBody)); err != nil {
			writeError(w, err)
			return
		}
		if !n.started.Load() || n.closed.Load() {
			writeError(w, ErrClosed)
			return
		}
		// Every internal call is bounded, a copy of a large block included;
		// the caller's own deadline is usually shorter.
		ctx, cancel := context.WithTimeout(r.Context(), 3*n.opts.RequestTimeout)
		defer cancel()
		mux.ServeHTTP(w, r.WithContext(ctx))
	})
}

// ErrorRows map the cluster's sentinels to HTTP answers. The internal API
// answers with them joined to httperr.Common, and turns answers back into
// the sentinels with the same table; the server's public API lists them
// too, so a cause gets one answer on both. A remote call that found no
// leader is wrapped with ErrNoLeader, which therefore goes first.
var ErrorRows = []httperr.Row{
	{Err: ErrUnauthorized, Status: http.StatusUnauthorized, Code: "unauthorized"},
	{Err: ErrBadReport, Status: http.StatusBadRequest, Code: "bad_report"},
	{Err: ErrBadRequest, Status: http.StatusBadRequest, Code: "bad_request"},
	{Err: ErrNoLeader, Status: http.StatusServiceUnavailable, Code: "no_leader"},
	{Err: ErrNotLeader, Status: http.StatusConflict, Code: "not_leader"},
	{Err: ErrResync, Status: http.StatusConflict, Code: "resync"},
	{Err: ErrNotMember, Status: http.StatusConflict, Code: "not_member"},
	{Err: ErrLastCopy, Status: http.StatusConflict, Code: "last_copy"},
	{Err: ErrBusy, Status: http.StatusTooManyRequests, Code: "overloaded"},
	{Err: ErrClosed, Status: http.StatusServiceUnavailable, Code: "closed"},
	// A node that did not answer: public answers say so without its
	// address, and a read passes over it.
	{Err: ErrUnreachable, Status: http.StatusServiceUnavailable, Code: "unreachable"},
}

// errorTable is the internal API's view of the one table.
var errorTable = httperr.Join(ErrorRows, httperr.Common)

func writeError(w http.ResponseWriter, err error) { errorTable.Write(w, err) }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// readJSON decodes a bounded JSON body; unknown fields are errors.
func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return nil
}

// leaderOrErr returns the leader role if this node has it in term (0: any
// term).
func (n *Node) leaderOrErr(term int64) (*leader, error) {
	l := n.lead.Load()
	if l == nil || (term != 0 && l.term != term) {
		return nil, ErrNotLeader
	}
	return l, nil
}

func (n *Node) handleReport(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReportBody+1))
	if err != nil {
		writeError(w, fmt.Errorf("%w: %v", ErrBadReport, err))
		return
	}
	if len(body) > maxReportBody {
		writeError(w, fmt.Errorf("%w: over %d bytes", ErrBadReport, maxReportBody))
		return
	}
	rep, err := decodeReport(body)
	if err != nil {
		writeError(w, err)
		return
	}
	l, err := n.leaderOrErr(int64(rep.Term))
	if err != nil {
		writeError(w, err)
		return
	}
	if err := l.apply(rep); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, struct{}{})
}

// leaderCall decodes a JSON request, runs fn on this node's leader role and
// answers with its result: the shape of every leader-only endpoint.
func leaderCall[Req, Resp any](n *Node, w http.ResponseWriter, r *http.Request, fn func(*leader, Req) (Resp, error)) {
	var req Req
	if err := readJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	l, err := n.leaderOrErr(0)
	if err != nil {
		writeError(w, err)
		return
	}
	resp, err := fn(l, req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, resp)
}

func (n *Node) handleLocate(w http.ResponseWriter, r *http.Request) {
	leaderCall(n, w, r, func(l *leader, req keysRequest) (holdersResponse, error) {
		return holdersResponse{Holders: l.holders(req.Keys), Complete: l.complete()}, nil
	})
}

func (n *Node) handleQuery(w http.ResponseWriter, r *http.Request) {
	leaderCall(n, w, r, func(l *leader, req keysRequest) (queryResponse, error) {
		return queryResponse{Nodes: l.query(req.Keys)}, nil
	})
}

func (n *Node) handleReplicas(w http.ResponseWriter, r *http.Request) {
	leaderCall(n, w, r, func(l *leader, req replicasRequest) (struct{}, error) {
		return struct{}{}, l.setReplicas(r.Context(), req.Key, req.Count)
	})
}

func (n *Node) handleLeaderStatus(w http.ResponseWriter, r *http.Request) {
	l, err := n.leaderOrErr(0)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, l.status())
}

// checkTerm refuses a command from a leader that is not the current one, so
// a deposed leader that has not noticed yet cannot drop copies on the
// strength of a stale index.
func (n *Node) checkTerm(term int64) error {
	li, ok := n.Leader()
	if !ok || li.Term != term {
		return fmt.Errorf("%w: term %d is not the current leader's", ErrNotLeader, term)
	}
	return nil
}

func (n *Node) handleFetch(w http.ResponseWriter, r *http.Request) {
	var req fetchRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := n.checkTerm(req.Term); err != nil {
		writeError(w, err)
		return
	}
	if req.Desired > 0 {
		n.desired.set(req.Key, req.Desired)
	}
	if n.store.Contains(req.Key) {
		n.rep.touch(req.Key)
		writeJSON(w, struct{}{})
		return
	}
	start := time.Now()
	h, o, err := n.fetchFrom(r.Context(), req.Key, req.From)
	if err != nil {
		writeError(w, err)
		return
	}
	defer h.Release()
	if n.deletedSince(req.Key, start.Add(-tombstoneWindow)) {
		// Deleted while the copy was planned: do not bring it back.
		writeError(w, fmt.Errorf("%w: %s was deleted", tier.ErrNotFound, req.Key))
		return
	}
	// A replica keeps the block's retention class (docs/retention.md).
	opts := tier.PutOptions{Checksum: h.Checksum(), HasChecksum: true, Meta: o.Info.Meta, PinnedUntil: o.Info.PinnedUntil,
		Retention: o.Info.Retention, RetainUntil: o.Info.RetainUntil}
	info := o.Info
	info.Size = int64(len(h.Bytes()))
	done, err := n.admitReplica(req.Key, info)
	if err != nil {
		writeError(w, err)
		return
	}
	if _, err := n.store.Put(r.Context(), req.Key, h.Bytes(), opts); err != nil {
		done(false)
		writeError(w, err)
		return
	}
	done(true)
	n.stats.admitted.Add(1)
	writeJSON(w, struct{}{})
}

func (n *Node) handleDrop(w http.ResponseWriter, r *http.Request) {
	var req dropRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := n.checkTerm(req.Term); err != nil {
		writeError(w, err)
		return
	}
	n.desired.forget(req.Key)
	if err := n.store.Delete(req.Key); err != nil && !errors.Is(err, tier.ErrNotFound) {
		writeError(w, err)
		return
	}
	n.droppedReplica(req.Key)
	writeJSON(w, struct{}{})
}

func (n *Node) handleDesired(w http.ResponseWriter, r *http.Request) {
	var req replicasRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Count < 1 || req.Count > 255 {
		writeError(w, fmt.Errorf("%w: count %d", ErrBadRequest, req.Count))
		return
	}
	if n.store.Contains(req.Key) {
		n.desired.set(req.Key, uint8(req.Count))
	}
	writeJSON(w, struct{}{})
}

func errorIs(err, target error) bool { return errors.Is(err, target) }
