package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/yuebing/yuebing/internal/bytesize"
	"github.com/yuebing/yuebing/replicate"
	"github.com/yuebing/yuebing/tier"
)

// Admission policies for blocks fetched from another node to serve a read.
const (
	AdmitAlways    = "always"     // keep a local copy of every block fetched
	AdmitSecondHit = "second-hit" // keep it when it is fetched a second time within the recent set
	AdmitNever     = "never"      // serve it and let it go
)

// Addrs are the addresses other nodes and clients use to reach a node.
type Addrs struct {
	HTTP     string `json:"http"`
	RESP     string `json:"resp,omitempty"`
	Transfer string `json:"transfer"`
}

// Options configures a Node. The fields with a YAML name are the settings
// of the server's cluster section (cluster.name, cluster.lease_ttl, ...),
// as are Replication's; the others are set by code.
type Options struct {
	// Cluster names the cluster: its keys in etcd live under
	// /yuebing/<Cluster>/. Required.
	Cluster string `yaml:"name"`
	// NodeName identifies the node across restarts: the name keeps its
	// node id. Required.
	NodeName string `yaml:"node_name"`
	// Endpoints are the etcd client URLs. Required.
	Endpoints Endpoints `yaml:"etcd"`
	// Token authenticates nodes to each other, on the internal HTTP API
	// and on the transfer service. Required, at most 256 bytes. A secret:
	// no YAML name, so a config dump never holds it (the server reads it
	// from its token file at start).
	Token string `yaml:"-"`
	// EtcdUsername and EtcdPassword log the node in to etcd when both are
	// set; an etcd without authentication lets the login pass. Default
	// none. A cluster with a token uses "root" and EtcdPassword(Token),
	// the embedded etcd's root user.
	EtcdUsername string `yaml:"-"`
	EtcdPassword string `yaml:"-"`
	// TransferListen is the transfer service's host:port. Required; port 0
	// picks a free one.
	TransferListen string `yaml:"-"`
	// LeaseTTL is how long a node that stopped answering stays a member:
	// its etcd lease's TTL, and so the time to notice a dead node or leader.
	// Default 10s; etcd rounds anything below about 2s up.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// DialTimeout bounds connecting to etcd. Default 5s.
	DialTimeout time.Duration `yaml:"-"`
	// ReportInterval is how often a node sends the leader what changed.
	// Default 200ms.
	ReportInterval time.Duration `yaml:"report_interval"`
	// MaxPending bounds the blocks whose changes wait to be reported. A
	// node that cannot reach a leader for long, or changes faster than it
	// reports, forgets them and sends its full state instead. Each costs
	// about 60 bytes. Default 65536.
	MaxPending int `yaml:"max_pending"`
	// MaxHitKeys bounds the distinct blocks whose hits wait to be reported;
	// hits of further blocks are not counted until the next report. Default
	// 16384.
	MaxHitKeys int `yaml:"-"`
	// HitSampling counts one access in this many (with its weight), so hit
	// counting costs next to nothing on a busy node. Default 1: every access.
	HitSampling int `yaml:"-"`
	// MaxFetches bounds reads of blocks from other nodes in flight; more
	// wait. Default 64.
	MaxFetches int `yaml:"-"`
	// MaxFetchBytes bounds the heap bytes of blocks being fetched from other
	// nodes and served without being admitted. Default 256 MiB.
	MaxFetchBytes bytesize.Size `yaml:"max_fetch_bytes"`
	// Budget, when set, is the node's in-flight byte budget, shared with
	// its front ends: a fetched block's bytes are charged to it as well as
	// to MaxFetchBytes, from before they are read until the last handle on
	// them is released. Nil: MaxFetchBytes alone bounds them.
	Budget Budget `yaml:"-"`
	// Admit is AdmitAlways, AdmitSecondHit (default) or AdmitNever.
	Admit string `yaml:"admit"`
	// RecentFetches is how many fetched keys second-hit admission
	// remembers. Default 65536.
	RecentFetches int `yaml:"-"`
	// RequestTimeout bounds one internal HTTP call. Default 10s.
	RequestTimeout time.Duration `yaml:"-"`
	// PeerTimeout bounds how long a read, a put's registration or a
	// delete waits for another node to start answering: a node that was
	// killed or frozen (its socket still accepts) is passed over after it,
	// well inside RequestTimeout. Default 2s.
	PeerTimeout time.Duration `yaml:"-"`
	// LocationCache bounds the block locations a node remembers from its
	// reads, so a repeated read of a block held elsewhere costs one round
	// trip. Default 65536 (about 100 bytes each).
	LocationCache int `yaml:"-"`
	// Replication configures the leader's replication core (heat,
	// thresholds, in-flight bounds); zero fields take its defaults. Its
	// settings sit in the cluster section beside the node's (hot_hits,
	// not replication.hot_hits), as they always have.
	Replication replicate.Options `yaml:",inline"`
	// ReplicationInterval is how often the leader's driver ticks the
	// core. Default 1s.
	ReplicationInterval time.Duration `yaml:"-"`
	// MaxNodes bounds node ids. Default 4096.
	MaxNodes int `yaml:"-"`
	// Logger. Default slog.Default().
	Logger *slog.Logger `yaml:"-"`
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 10 * time.Second
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.ReportInterval == 0 {
		o.ReportInterval = 200 * time.Millisecond
	}
	if o.MaxPending == 0 {
		o.MaxPending = 65536
	}
	if o.MaxHitKeys == 0 {
		o.MaxHitKeys = 16384
	}
	if o.HitSampling == 0 {
		o.HitSampling = 1
	}
	if o.MaxFetches == 0 {
		o.MaxFetches = 64
	}
	if o.MaxFetchBytes == 0 {
		o.MaxFetchBytes = 256 << 20
	}
	if o.Admit == "" {
		o.Admit = AdmitSecondHit
	}
	if o.RecentFetches == 0 {
		o.RecentFetches = 65536
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 10 * time.Second
	}
	if o.PeerTimeout == 0 {
		o.PeerTimeout = 2 * time.Second
	}
	if o.LocationCache == 0 {
		o.LocationCache = 65536
	}
	if o.ReplicationInterval == 0 {
		o.ReplicationInterval = time.Second
	}
	if o.MaxNodes == 0 {
		o.MaxNodes = 4096
	}
	if o.Replication.MaxNodes == 0 {
		o.Replication.MaxNodes = o.MaxNodes
	}
	o.Replication.EnsureDefaults()
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidName reports whether s may name a cluster or a node: 1 to 63
// letters, digits, '.', '_' or '-', starting with a letter or digit, so it
// is safe in etcd keys, logs and headers.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// Validate reports every invalid field.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("cluster: "+format, args...))
	}
	if !ValidName(o.Cluster) {
		bad("Cluster %q: want 1 to 63 letters, digits, '.', '_' or '-'", o.Cluster)
	}
	if !ValidName(o.NodeName) {
		bad("NodeName %q: want 1 to 63 letters, digits, '.', '_' or '-'", o.NodeName)
	}
	if len(o.Endpoints) == 0 {
		bad("Endpoints: at least one etcd URL is required")
	}
	if o.Token == "" || len(o.Token) > 256 {
		bad("Token: required, 1 to 256 bytes")
	}
	if o.TransferListen == "" {
		bad("TransferListen: required")
	}
	pos := func(name string, d time.Duration) {
		if d <= 0 {
			bad("%s %v must be positive", name, d)
		}
	}
	pos("LeaseTTL", o.LeaseTTL)
	pos("DialTimeout", o.DialTimeout)
	pos("ReportInterval", o.ReportInterval)
	pos("RequestTimeout", o.RequestTimeout)
	pos("PeerTimeout", o.PeerTimeout)
	pos("ReplicationInterval", o.ReplicationInterval)
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxPending", int64(o.MaxPending)}, {"MaxHitKeys", int64(o.MaxHitKeys)},
		{"HitSampling", int64(o.HitSampling)}, {"MaxFetches", int64(o.MaxFetches)},
		{"MaxFetchBytes", int64(o.MaxFetchBytes)},
		{"RecentFetches", int64(o.RecentFetches)}, {"LocationCache", int64(o.LocationCache)},
	} {
		if f.v <= 0 {
			bad("%s %d must be positive", f.name, f.v)
		}
	}
	switch o.Admit {
	case AdmitAlways, AdmitSecondHit, AdmitNever:
	default:
		bad("Admit %q: want %q, %q or %q", o.Admit, AdmitAlways, AdmitSecondHit, AdmitNever)
	}
	if o.MaxNodes < 1 || o.MaxNodes > 1<<20 {
		bad("MaxNodes %d must be in [1, 1<<20]", o.MaxNodes)
	}
	if err := o.Replication.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// tierLevelName is for logs and answers: the name of local tier level.
func tierLevelName(store *tier.Hierarchy, level int) string {
	if ts := store.Tiers(); level >= 0 && level < len(ts) {
		return ts[level].Name()
	}
	return "remote"
}

// Budget is a byte budget shared with other parts of the process (the
// server's in-flight budget). Both methods return the function that gives
// the bytes back.
type Budget interface {
	// Acquire takes n bytes, waiting a bounded time for them.
	Acquire(ctx context.Context, n int64) (func(), error)
	// TryAcquire takes n bytes if they are free now.
	TryAcquire(n int64) (func(), bool)
}
