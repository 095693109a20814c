package cluster

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Embedded is an etcd server running inside a node, for a one-command dev
// cluster: one node starts it (serve --etcd-embedded) and the others point
// their Endpoints at it. It is a single-member etcd: when that node stops,
// the cluster loses its coordination until it is back (nodes keep serving
// their own blocks meanwhile). Production runs an external etcd cluster.
type Embedded struct {
	e        *embed.Etcd
	endpoint string
}

// EmbedOptions configures an embedded etcd.
type EmbedOptions struct {
	// Dir holds etcd's data (its write-ahead log and snapshots): the node
	// ids and the cluster's small settings survive restarts.
	Dir string
	// Name of the etcd member. Default "yuebing".
	Name string
	// ClientListen is the host:port etcd serves clients on; port 0 picks
	// a free one. Default 127.0.0.1:2379.
	ClientListen string
	// PeerListen is the host:port of etcd's peer traffic (unused by a
	// single member, but etcd needs one). Default 127.0.0.1:2380.
	PeerListen string
	// StartTimeout bounds waiting for the server to be ready. Default 60s.
	StartTimeout time.Duration
}

// StartEmbedded starts an embedded etcd and waits until it serves.
func StartEmbedded(opts EmbedOptions) (*Embedded, error) {
	if opts.Name == "" {
		opts.Name = "yuebing"
	}
	if opts.ClientListen == "" {
		opts.ClientListen = "127.0.0.1:2379"
	}
	if opts.PeerListen == "" {
		opts.PeerListen = "127.0.0.1:2380"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	cu, err := url.Parse("http://" + opts.ClientListen)
	if err != nil {
		return nil, fmt.Errorf("cluster: embedded etcd client address %q: %w", opts.ClientListen, err)
	}
	pu, err := url.Parse("http://" + opts.PeerListen)
	if err != nil {
		return nil, fmt.Errorf("cluster: embedded etcd peer address %q: %w", opts.PeerListen, err)
	}
	cfg := embed.NewConfig()
	cfg.Name = opts.Name
	cfg.Dir = opts.Dir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(opts.Name)
	// etcd logs through zap; its errors at shutdown are noise next to the
	// node's own log, so it stays quiet.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: starting embedded etcd: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("cluster: embedded etcd: %w", err)
	case <-ctx.Done():
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("cluster: embedded etcd not ready after %v", opts.StartTimeout)
	}
	return &Embedded{e: e, endpoint: "http://" + e.Clients[0].Addr().String()}, nil
}

// Endpoint returns the client URL to put in Options.Endpoints.
func (m *Embedded) Endpoint() string { return m.endpoint }

// Close stops the server.
func (m *Embedded) Close() { m.e.Close() }
