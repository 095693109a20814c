package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/cluster"
	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/tier"
)

// ClusterConfig joins the node to a cluster (docs/cluster.md). With Name
// empty the node runs alone. It is cluster.Options, whose fields with a
// YAML name (and those of its Replication, replicate.Options) are the
// section's settings and whose defaults are the section's, and the
// settings only the server has: the embedded etcd, the token file, the
// advertised addresses and the Redis front end's reach. The fields of
// cluster.Options without a YAML name are set by the server at start
// (Token, TransferListen, Budget, Logger) or left to their defaults.
type ClusterConfig struct {
	cluster.Options `yaml:",inline"`
	// EtcdEmbedded starts a single-member etcd inside this node, for a dev
	// cluster: the other nodes set etcd to its URL. When Endpoints is
	// empty the node uses it itself.
	EtcdEmbedded bool `yaml:"etcd_embedded"`
	// EtcdEmbeddedListen is the embedded etcd's client host:port. Default
	// 127.0.0.1:2379.
	EtcdEmbeddedListen string `yaml:"etcd_embedded_listen"`
	// EtcdEmbeddedPeerListen is its peer host:port. Default 127.0.0.1:2380.
	EtcdEmbeddedPeerListen string `yaml:"etcd_embedded_peer_listen"`
	// TokenFile holds the cluster token that nodes present to each other
	// (internal API and transfer service), that signs their records in
	// etcd, and from which the embedded etcd's root password is derived;
	// the server reads it into Options.Token at start, so the token itself
	// is in no config dump. Required when a listener (the embedded etcd's
	// included) is off loopback, and whenever auth.tokens_file is set.
	// Otherwise a token derived from the cluster's name is used: it is no
	// secret, and fits only a dev cluster on one host with authentication
	// off.
	TokenFile string `yaml:"token_file"`
	// AdvertiseHTTP, AdvertiseTransfer and AdvertiseRESP are the addresses
	// other nodes reach this one at. Default: the bound listen addresses,
	// which must then name a host.
	AdvertiseHTTP     string `yaml:"advertise_http"`
	AdvertiseTransfer string `yaml:"advertise_transfer"`
	AdvertiseRESP     string `yaml:"advertise_resp"`
	// RESPLocalOnly keeps the Redis front end to the keys set through this
	// node. Default false: a read of a key this node lacks asks every other
	// member, one round trip each, concurrently (docs/cluster.md).
	RESPLocalOnly bool `yaml:"resp_local_only"`
}

// Enabled reports whether the node joins a cluster.
func (c *ClusterConfig) Enabled() bool { return c.Cluster != "" }

// ensureDefaults fills the zero settings of a node that joins a cluster
// with cluster.Options' defaults (replicate.Options' among them), and the
// server's own. The code-only fields it fills too are the ones the node
// would default to; the logger is left to the server.
func (c *ClusterConfig) ensureDefaults() {
	if !c.Enabled() {
		return
	}
	if c.NodeName == "" {
		c.NodeName, _ = os.Hostname()
	}
	if c.EtcdEmbeddedListen == "" {
		c.EtcdEmbeddedListen = "127.0.0.1:2379"
	}
	if c.EtcdEmbeddedPeerListen == "" {
		c.EtcdEmbeddedPeerListen = "127.0.0.1:2380"
	}
	logger := c.Logger
	c.Options.EnsureDefaults()
	c.Logger = logger
}

func (c *Config) validateCluster(bad func(field, format string, args ...any)) {
	cc := &c.Cluster
	if !cc.Enabled() {
		if cc.EtcdEmbedded || len(cc.Endpoints) > 0 {
			bad("cluster.name", "required with cluster.etcd or cluster.etcd_embedded (--cluster NAME)")
		}
		return
	}
	if !cluster.ValidName(cc.Cluster) {
		bad("cluster.name", "%q: want 1 to 63 letters, digits, '.', '_' or '-'", cc.Cluster)
	}
	if !cluster.ValidName(cc.NodeName) {
		bad("cluster.node_name", "%q: want 1 to 63 letters, digits, '.', '_' or '-' (set --node-name)", cc.NodeName)
	}
	if len(cc.Endpoints) == 0 && !cc.EtcdEmbedded {
		bad("cluster.etcd", "required: etcd client URLs (--etcd http://h1:2379,...), or cluster.etcd_embedded (--etcd-embedded) for a dev cluster")
	}
	for _, u := range cc.Endpoints {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			bad("cluster.etcd", "%q: want a URL like http://127.0.0.1:2379", u)
		}
	}
	if cc.EtcdEmbedded {
		for _, l := range []struct{ field, addr string }{{"cluster.etcd_embedded_listen", cc.EtcdEmbeddedListen}, {"cluster.etcd_embedded_peer_listen", cc.EtcdEmbeddedPeerListen}} {
			if err := checkListen(l.addr); err != nil {
				bad(l.field, "%q: %v", l.addr, err)
			}
		}
	}
	if c.Transfer.Listen == "" {
		bad("transfer.listen", "required in a cluster: blocks move between nodes over the transfer service")
	}
	if cc.TokenFile == "" && !c.allLoopback() {
		bad("cluster.token_file", "required when a listener is not on loopback: nodes authenticate each other with this token")
	}
	// Without a token file the cluster token is derived from the cluster's
	// name, which anyone can read in the banner or guess: it opens the
	// internal API, whose reads and drops reach every tenant's blocks.
	// With tenants' tokens on that would bypass them, so a real token is
	// required; a random one per node would not do, as the nodes must
	// share it.
	if cc.TokenFile == "" && c.Auth.TokensFile != "" {
		bad("cluster.token_file", "required when auth.tokens_file is set: without it the cluster token is derived from the cluster's name, and anyone who knows the name could read and delete every tenant's blocks through the internal API (--cluster-token-file, 16 to 256 bytes)")
	}
	if cc.EtcdEmbedded && cc.TokenFile == "" {
		for _, l := range []struct{ field, addr string }{{"cluster.etcd_embedded_listen", cc.EtcdEmbeddedListen}, {"cluster.etcd_embedded_peer_listen", cc.EtcdEmbeddedPeerListen}} {
			if !isLoopback(l.addr) {
				bad(l.field, "%q is not on loopback: set cluster.token_file, whose token turns on the embedded etcd's authentication", l.addr)
			}
		}
	}
	for _, a := range []struct{ field, adv, listen string }{
		{"cluster.advertise_http", cc.AdvertiseHTTP, c.HTTP.Listen},
		{"cluster.advertise_transfer", cc.AdvertiseTransfer, c.Transfer.Listen},
	} {
		if a.adv != "" {
			if err := checkListen(a.adv); err != nil {
				bad(a.field, "%q: %v", a.adv, err)
			}
			continue
		}
		if host, _, err := net.SplitHostPort(a.listen); err == nil && unspecifiedHost(host) {
			bad(a.field, "required: the listener %q names no host other nodes could reach", a.listen)
		}
	}
	switch cc.Admit {
	case cluster.AdmitAlways, cluster.AdmitSecondHit, cluster.AdmitNever:
	default:
		bad("cluster.admit", "%q: want always, second-hit or never", cc.Admit)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"cluster.lease_ttl", cc.LeaseTTL}, {"cluster.report_interval", cc.ReportInterval}, {"cluster.heat_window", cc.Replication.Window}} {
		if d.v <= 0 {
			bad(d.field, "%v: want a positive duration", d.v)
		}
	}
	if cc.MaxFetchBytes < c.Limits.MaxBlockSize {
		bad("cluster.max_fetch_bytes", "%s: must be at least limits.max_block_size (%s)", cc.MaxFetchBytes, c.Limits.MaxBlockSize)
	}
	if cc.MaxPending < 1 {
		bad("cluster.max_pending", "%d: must be positive", cc.MaxPending)
	}
	if cc.Replication.HotHits < 1 {
		bad("cluster.hot_hits", "%d: must be positive", cc.Replication.HotHits)
	}
	if r := cc.Replication.MaxReplicas; r < 1 || r > 255 {
		bad("cluster.max_replicas", "%d: want 1 to 255", r)
	}
}

func unspecifiedHost(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

func (c *Config) allLoopback() bool {
	for _, a := range []string{c.HTTP.Listen, c.RESP.Listen, c.Transfer.Listen} {
		if a != "" && !isLoopback(a) {
			return false
		}
	}
	return true
}

// clusterToken reads the token file, or derives the loopback dev token
// (validateCluster allows it only with every listener on loopback and
// tenants' authentication off).
func (c *Config) clusterToken() (string, error) {
	if c.Cluster.TokenFile == "" {
		return "yuebing-dev-cluster/" + c.Cluster.Cluster, nil
	}
	b, err := os.ReadFile(c.Cluster.TokenFile)
	if err != nil {
		return "", fmt.Errorf("%w: cluster.token_file: %v", ErrInvalidConfig, err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 || len(tok) > 256 {
		return "", fmt.Errorf("%w: cluster.token_file: the token must be 16 to 256 bytes, got %d", ErrInvalidConfig, len(tok))
	}
	return tok, nil
}

// clusterParts are a node's cluster pieces, started and stopped with it.
type clusterParts struct {
	node *cluster.Node
	etcd *cluster.Embedded
}

// newCluster starts the embedded etcd (if configured) and prepares the
// node's cluster membership; joinCluster starts it once the listeners are
// bound.
func newCluster(cfg Config, store *tier.Hierarchy, n *Node) (*clusterParts, error) {
	cc := cfg.Cluster
	token, err := cfg.clusterToken()
	if err != nil {
		return nil, err
	}
	parts := &clusterParts{}
	ropts := cc.Options
	ropts.Token, ropts.TransferListen = token, cfg.Transfer.Listen
	ropts.Budget, ropts.Logger = n.budget.User(budgetCluster), n.log
	// With a real token the embedded etcd requires a root login whose
	// password the token gives, and every node logs in so (an etcd
	// without authentication lets the login pass). The dev token is
	// public: a password from it would protect nothing.
	if cc.TokenFile != "" {
		ropts.EtcdUsername, ropts.EtcdPassword = "root", cluster.EtcdPassword(token)
	}
	if cc.EtcdEmbedded {
		e, err := cluster.StartEmbedded(cluster.EmbedOptions{
			Dir: filepath.Join(cfg.DataDir, "etcd"), Name: cc.NodeName,
			ClientListen: cc.EtcdEmbeddedListen, PeerListen: cc.EtcdEmbeddedPeerListen,
			RootPassword: ropts.EtcdPassword,
		})
		if err != nil {
			return nil, fmt.Errorf("server: cluster.etcd_embedded: %w", err)
		}
		parts.etcd = e
		if len(ropts.Endpoints) == 0 {
			ropts.Endpoints = cluster.Endpoints{e.Endpoint()}
		}
	}
	node, err := cluster.New(ropts, store)
	if err != nil {
		parts.close()
		return nil, fmt.Errorf("server: cluster: %w", err)
	}
	parts.node = node
	return parts, nil
}

// join registers the node, now that its listeners have addresses.
func (p *clusterParts) join(cfg Config, httpAddr, respAddr string) error {
	cc := cfg.Cluster
	addrs := cluster.Addrs{HTTP: cc.AdvertiseHTTP, Transfer: cc.AdvertiseTransfer, RESP: cc.AdvertiseRESP}
	if addrs.HTTP == "" {
		addrs.HTTP = httpAddr
	}
	if addrs.RESP == "" {
		addrs.RESP = respAddr // empty when the front end is off
	}
	if addrs.Transfer == "" {
		addrs.Transfer = p.node.TransferAddr()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.node.Start(ctx, addrs); err != nil {
		return fmt.Errorf("server: cluster: %w", err)
	}
	return nil
}

func (p *clusterParts) close() error {
	var err error
	if p.node != nil {
		err = p.node.Close()
	}
	if p.etcd != nil {
		p.etcd.Close()
	}
	return err
}

// withInternal routes /internal/ to the cluster's internal API, outside
// the tenants' /v1 and its authentication: peers present the cluster token.
func withInternal(h http.Handler, c *cluster.Node) http.Handler {
	if c == nil {
		return h
	}
	internal := c.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/internal/") {
			internal.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Header names of cluster reads and puts.
const (
	// HeaderSource names the node a block was read from.
	HeaderSource = "X-Yuebing-Source"
	// HeaderReplicas is a put's replica count (replica_num).
	HeaderReplicas = "X-Yuebing-Replicas"
)

// ErrNoCluster: a cluster endpoint on a node that runs alone.
var ErrNoCluster = errors.New("server: not in a cluster")

func (a *API) clusterNode() (*cluster.Node, error) {
	if a.opts.Cluster == nil {
		return nil, fmt.Errorf("%w: start the node with --cluster NAME", ErrNoCluster)
	}
	return a.opts.Cluster, nil
}

// replicasHeader parses X-Yuebing-Replicas: 0 when absent.
func (a *API) replicasHeader(c *gin.Context) (int, error) {
	h := c.GetHeader(HeaderReplicas)
	if h == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(h)
	if err != nil || n < 1 || n > 255 {
		return 0, fmt.Errorf("%w: %s %q: want a replica count from 1 to 255", ErrBadRequest, HeaderReplicas, h)
	}
	if n > 1 && a.opts.Cluster == nil {
		return 0, fmt.Errorf("%w: %s %d needs a cluster (serve --cluster NAME)", ErrBadRequest, HeaderReplicas, n)
	}
	return n, nil
}

type clusterKeysRequest struct {
	Keys []block.Key `json:"keys"`
}

// clusterKeys gives a cluster endpoint its node and the keys of its
// request; on an error it has answered and returns false.
func (a *API) clusterKeys(c *gin.Context) (*cluster.Node, []block.Key, bool) {
	cn, err := a.clusterNode()
	if err != nil {
		a.fail(c, err)
		return nil, nil, false
	}
	var req clusterKeysRequest
	if err := a.decodeJSON(c, &req); err != nil {
		a.fail(c, err)
		return nil, nil, false
	}
	if len(req.Keys) == 0 || len(req.Keys) > a.limits.MaxBatchKeys {
		a.fail(c, fmt.Errorf("%w: %d keys, want 1 to %d (limits.max_batch_keys)", ErrBadRequest, len(req.Keys), a.limits.MaxBatchKeys))
		return nil, nil, false
	}
	return cn, req.Keys, true
}

// getCluster answers GET /v1/cluster: members, leader, the leader's index
// and replication figures.
func (a *API) getCluster(c *gin.Context) {
	cn, err := a.clusterNode()
	if err != nil {
		a.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, cn.Status(c.Request.Context()))
}

// clusterQuery answers POST /v1/cluster/query: per node, the longest
// prefix of the chain it holds and its per-tier counts.
func (a *API) clusterQuery(c *gin.Context) {
	cn, keys, ok := a.clusterKeys(c)
	if !ok {
		return
	}
	ms, err := cn.Query(c.Request.Context(), keys)
	if err != nil {
		a.fail(c, err)
		return
	}
	if ms == nil {
		ms = []cluster.Match{}
	}
	c.JSON(http.StatusOK, gin.H{"nodes": ms})
}

// clusterHolders answers POST /v1/cluster/holders: the nodes holding each
// key.
func (a *API) clusterHolders(c *gin.Context) {
	cn, keys, ok := a.clusterKeys(c)
	if !ok {
		return
	}
	hs, err := cn.Holders(c.Request.Context(), keys)
	if err != nil {
		a.fail(c, err)
		return
	}
	type item struct {
		Key      block.Key            `json:"key"`
		Replicas int                  `json:"replicas"`
		Nodes    []cluster.HolderInfo `json:"nodes"`
	}
	out := make([]item, len(keys))
	for i, k := range keys {
		out[i] = item{Key: k, Replicas: len(hs[i]), Nodes: hs[i]}
	}
	c.JSON(http.StatusOK, gin.H{"blocks": out})
}

// clusterPull answers POST /v1/cluster/pull: this node copies the blocks
// of the chain it lacks from their holders and keeps them (a conductor's
// pull plan), stopping at the first block no node holds.
func (a *API) clusterPull(c *gin.Context) {
	cn, keys, ok := a.clusterKeys(c)
	if !ok {
		return
	}
	res, err := cn.Pull(c.Request.Context(), keys)
	if err != nil {
		a.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

type replicasRequest struct {
	Count int `json:"count"`
}

// setReplicas answers POST /v1/blocks/{key}/replicas: a block's replica
// count (Mooncake's change_replica). A tenant may change the count of a
// block it can see on this node; any other needs an admin.
func (a *API) setReplicas(c *gin.Context) {
	cn, err := a.clusterNode()
	if err != nil {
		a.fail(c, err)
		return
	}
	t, err := blockTarget(c, false)
	if err != nil {
		a.fail(c, err)
		return
	}
	var req replicasRequest
	if err := a.decodeJSON(c, &req); err != nil {
		a.fail(c, err)
		return
	}
	if req.Count < 1 || req.Count > 255 {
		a.fail(c, fmt.Errorf("%w: count %d: want 1 to 255", ErrBadRequest, req.Count))
		return
	}
	p := principal(c)
	if a.store.Contains(t.key) {
		if _, _, err := a.visible(p, t); err != nil {
			a.fail(c, err)
			return
		}
	} else if err := requireAdmin(p); err != nil {
		a.fail(c, err)
		return
	}
	if err := cn.SetReplicas(c.Request.Context(), t.key, req.Count); err != nil {
		a.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"key": t.key, "count": req.Count})
}

// publish registers blocks just stored (or their pins just changed) with
// the cluster's leader before the request is acknowledged, so a read on
// any node finds them (docs/cluster.md). A leader that does not take them
// does not fail the request: the block is stored, its state goes with the
// next report, and readers ask the nodes directly while the leader's index
// is incomplete.
func (a *API) publish(ctx context.Context, keys ...block.Key) {
	if a.opts.Cluster == nil || len(keys) == 0 {
		return
	}
	if err := a.opts.Cluster.Publish(ctx, keys...); err != nil {
		a.log.Debug("server: registering blocks with the cluster's leader", "blocks", len(keys), "err", err)
	}
}

// readRemote serves a GET or HEAD of a block this node does not hold: it
// is read from a node that does, over the transfer service.
func (a *API) readRemote(c *gin.Context, t target, head bool) {
	if !head && c.GetHeader("Range") == "" {
		if err := a.relay(c, t); !errors.Is(err, cluster.ErrNotRelayed) {
			a.store.Missed() // of this node's store, as Fetch counts it
			if err != nil && !c.Writer.Written() {
				if errors.Is(err, tier.ErrNotFound) {
					err = notFound(t)
				}
				a.fail(c, err)
			}
			return
		}
	}
	h, o, meta, err := a.fetchVisible(c.Request.Context(), principal(c), t)
	if err != nil {
		a.fail(c, err)
		return
	}
	defer h.Release()
	a.sendBlock(c, h, o, meta, head)
}

// relay answers a GET of a whole block held on another node without a copy
// here: the holder's answer decides the headers, then its bytes go from the
// holder's connection to the client's (spliced by the kernel where both are
// TCP). The block's CRC-32C goes along in X-Yuebing-Crc32c for the client
// to check, as for a block served from this node's DRAM. An error after the
// headers went out cuts the answer short: the client sees a body shorter
// than its Content-Length, never a complete wrong one. ErrNotRelayed: the
// block is to be read whole (and kept here); the caller does that.
func (a *API) relay(c *gin.Context, t target) error {
	p := principal(c)
	return a.opts.Cluster.Relay(c.Request.Context(), t.key, func(r cluster.Relayed) error {
		meta := r.Origin.Info.Meta
		if needsCheck(p, t) && !canSee(p, t, meta) {
			return notFound(t)
		}
		hdr := c.Writer.Header()
		hdr.Set("Accept-Ranges", "bytes")
		a.setBlockHeaders(hdr, r.Origin.Info.Size, r.Origin.Info.Checksum, r.Origin, meta)
		hdr.Set("Content-Length", strconv.FormatInt(r.Origin.Info.Size, 10))
		c.Status(http.StatusOK)
		c.Writer.WriteHeaderNow()
		// The writer gin wraps is the one that can splice.
		var w io.Writer = c.Writer
		if u, ok := c.Writer.(interface{ Unwrap() http.ResponseWriter }); ok {
			w = u.Unwrap()
		}
		n, err := r.WriteTo(w)
		c.Set(ctxRelayedBytes, n)
		a.store.Accessed(t.key, int(r.Origin.Info.Size))
		if err != nil {
			a.log.Debug("server: relaying a block from another node", "key", t.key, "source", r.Origin.Source, "err", err)
		}
		return err
	})
}

// ctxRelayedBytes is the gin context key of the bytes a relay wrote past
// gin's writer, for the bytes-out metric.
const ctxRelayedBytes = "yuebing.relayed_bytes"

// fetchVisible reads a block this node does not hold from a node that
// does, with its metadata record, if p may see it; otherwise the error is
// the not-found of t (or the fetch's own).
func (a *API) fetchVisible(ctx context.Context, p auth.Principal, t target) (*tier.Handle, tier.Origin, []byte, error) {
	h, o, err := a.store.Fetch(ctx, t.key)
	if err != nil {
		if errors.Is(err, tier.ErrNotFound) {
			err = notFound(t)
		}
		return nil, o, nil, err
	}
	meta := o.Info.Meta
	if o.Level != tier.RemoteLevel {
		// It arrived here meanwhile.
		info, _, err := a.store.Stat(t.key)
		if err != nil {
			h.Release()
			return nil, o, nil, notFound(t)
		}
		meta = info.Meta
	}
	if needsCheck(p, t) && !canSee(p, t, meta) {
		h.Release()
		return nil, o, nil, notFound(t)
	}
	return h, o, meta, nil
}
