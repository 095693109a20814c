package cluster

import (
	"context"
	"fmt"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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
	// RootPassword, when set, turns on etcd's authentication with a root
	// user of this password (EtcdPassword of the cluster token), so only
	// nodes holding the token can read or write the cluster's keys. A data
	// directory whose root user has another password (made with another
	// token) is refused. Default none: anyone who reaches ClientListen may
	// read and write, as in etcd's own default.
	RootPassword string
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
	// The only password is the root one, an HMAC of the cluster token:
	// 256 random-looking bits, which bcrypt's work factor would not make
	// harder to guess, only every login slower.
	cfg.BcryptCost = 4 // bcrypt.MinCost
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
	m := &Embedded{e: e, endpoint: "http://" + e.Clients[0].Addr().String()}
	if opts.RootPassword != "" {
		if err := m.enableAuth(ctx, opts.StartTimeout, opts.RootPassword); err != nil {
			e.Close()
			return nil, err
		}
	}
	return m, nil
}

// rootUser is the etcd user nodes log in as when the embedded etcd has
// authentication on: a dev cluster's nodes all hold the same token, so
// they share one user.
const rootUser = "root"

// enableAuth turns on authentication with the root user, or checks that a
// server where it is already on (an earlier run) takes this password.
func (m *Embedded) enableAuth(ctx context.Context, timeout time.Duration, password string) error {
	// Logged in as root from the start: against a server without
	// authentication the login is skipped; against one with it, a wrong
	// password fails here.
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{m.endpoint}, Username: rootUser, Password: password,
		DialTimeout: timeout, Logger: zap.NewNop(), Context: ctx,
	})
	if err != nil {
		return fmt.Errorf("cluster: embedded etcd: logging in as %s with the password the cluster token gives (a data directory made with another token?): %w", rootUser, err)
	}
	defer cli.Close()
	st, err := cli.AuthStatus(ctx)
	if err != nil {
		return fmt.Errorf("cluster: embedded etcd: %w", err)
	}
	if st.Enabled {
		return nil
	}
	// A root user left by an earlier run that stopped before turning
	// authentication on takes this password.
	if _, err := cli.UserGet(ctx, rootUser); err == nil {
		if _, err := cli.UserChangePassword(ctx, rootUser, password); err != nil {
			return fmt.Errorf("cluster: embedded etcd: setting the root password: %w", err)
		}
	} else if _, err := cli.UserAdd(ctx, rootUser, password); err != nil {
		return fmt.Errorf("cluster: embedded etcd: adding the root user: %w", err)
	}
	if _, err := cli.UserGrantRole(ctx, rootUser, "root"); err != nil {
		return fmt.Errorf("cluster: embedded etcd: granting the root role: %w", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("cluster: embedded etcd: turning authentication on: %w", err)
	}
	return nil
}

// Endpoint returns the client URL to put in Options.Endpoints.
func (m *Embedded) Endpoint() string { return m.endpoint }

// Close stops the server.
func (m *Embedded) Close() { m.e.Close() }
