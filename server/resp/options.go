package resp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/server/budget"
	"github.com/yuebing/yuebing/tier"
)

// Options configures a Server.
type Options struct {
	// Store holds the values. Required. The server registers an OnDrop
	// listener on it and rebuilds its key table from the blocks it holds.
	Store *tier.Hierarchy
	// Tokens authenticates clients (AUTH, HELLO AUTH). Nil turns
	// authentication off: every client is an admin of tenant "default".
	Tokens *auth.Tokens
	// Namespace maps a tenant to the block namespace of its Redis keys.
	// Default tenant + "/redis". The result must be a valid namespace
	// (block.ValidateNamespace) whose tenant is the given one, so two
	// tenants' identical key strings never collide.
	Namespace func(tenant string) string
	// MaxValueSize is the largest value SET accepts, in bytes. A longer
	// declared bulk is refused before any of it is read. Default 256 MiB.
	MaxValueSize int64
	// MaxBulkLen is the longest bulk string the protocol accepts at all, in
	// bytes: a value between MaxValueSize and MaxBulkLen is refused and
	// skipped so the connection stays usable; a longer one is a protocol
	// error that closes the connection (Redis's proto-max-bulk-len).
	// Default 512 MiB, and at least MaxValueSize.
	MaxBulkLen int64
	// MaxRequestBytes bounds the bytes of one command's arguments held in
	// memory (keys, options, values too short to stream; 32 bytes are
	// counted per argument for its bookkeeping). Values of SET and MSET
	// longer than 64 KiB stream into the store and do not count. A command
	// beyond it is skipped and answered with an error. Default 1 MiB.
	MaxRequestBytes int
	// Budget is the front end's share of the node's in-flight budget
	// (limits.max_inflight_bytes): a value streamed in by SET, MSET and the
	// like holds its length from it until it is stored, since a value bound
	// for the SSD tier sits in the heap until then, and a GET of a value
	// held below the top tier holds its length while the copy read back is
	// sent. A value the budget cannot admit within its bounded wait is
	// answered "-ERR ..." naming the limit and read and discarded through
	// the connection's buffer (never held), so the connection stays usable;
	// such a GET is answered the same way (an MGET element is nil). Nil:
	// no bound beyond MaxValueSize per connection.
	Budget *budget.User
	// MaxArgs is the largest multibulk count accepted; a larger one is a
	// protocol error. Default 1<<20.
	MaxArgs int
	// MaxConns bounds open connections; a client beyond it is told
	// "-ERR max number of clients reached" and disconnected. Default 10000.
	MaxConns int
	// StallTimeout bounds how long a command may wait for more of its bytes
	// from the client, and how long a reply may wait for the client to read
	// it, before the connection is closed. It frees the store space a
	// stalled SET has reserved and the block pins a stalled GET holds.
	// Idle connections between commands are never timed out. Default 30s.
	StallTimeout time.Duration
	// Cluster, when set, makes the nodes' front ends one keyspace: a read
	// (GET, MGET, GETRANGE, STRLEN, EXISTS, TYPE, TTL, PTTL) of a key this
	// node does not have asks the others; a SET or DEL tells them before it
	// is acknowledged, so they drop an older value; EXPIRE and PERSIST of
	// a key another node holds change it there. KEYS, SCAN, DBSIZE and
	// FLUSHDB stay per node, as in Redis Cluster (docs/resp.md). Nil: the
	// node's own keys only.
	Cluster Names
	// InlineMax is the longest value kept inline: in the key table, with
	// its CRC-32C, instead of in a block of the store with a record and an
	// index entry of its own (docs/resp.md, "Inline values"). Default
	// DefaultInlineMax; negative keeps every value in a block.
	InlineMax int
	// InlineCapacity bounds what inline values cost in memory, in bytes:
	// their keys, values and table entries. Past it the least recently
	// used of a sample of inline keys are evicted, as Redis's allkeys-lru
	// does. When the store's top tier is the DRAM tier, inline values
	// take their memory from it (share.go): the tier evicts blocks to
	// make room for them, up to this bound, and they are evicted when it
	// can give no more; default half the tier's capacity, so blocks keep
	// at least the other half. Over any other top tier they sit beside
	// it; default a sixteenth of its capacity, at least 16 MiB.
	InlineCapacity int64
	// Retain gives the stored block key of namespace ns, of size bytes,
	// a retention class until until (zero: until changed): what SET ...
	// RETENTION and YUEBING.RETAIN call once the value is stored. The
	// node wires it to its API, which charges hard pins against the
	// namespace's quota; an error wrapping tier.ErrNotFound means the block
	// is gone. Nil: Store.SetRetention, with no quota.
	Retain func(ctx context.Context, ns string, key block.Key, size int64, class tier.Retention, until time.Time) error
	// EventLoop serves connections from epoll event loops instead of a
	// goroutine each (Linux only; NewServer fails elsewhere). A loop runs
	// small commands known not to block; a connection sending anything
	// else (a large value, AUTH, a command that may wait on the store, the
	// budget or the cluster) leaves its loop for a goroutine of its own
	// for good. Default off (docs/resp.md, "Event loop").
	EventLoop bool
	// EventLoops is the number of event loops. Default GOMAXPROCS/2, at
	// least 1.
	EventLoops int
	// Version is reported as yuebing_version by INFO. Default "devel".
	Version string
	// Now is the clock for expiry. Default time.Now.
	Now func() time.Time
	// Logger. Default slog.Default().
	Logger *slog.Logger

	// sleep waits d or until stop is closed: how a connection holds the
	// answer to a failed AUTH. Tests record the delays instead. Default: a
	// timer.
	sleep func(d time.Duration, stop <-chan struct{})
	// Latency, if set, is called with each command's time, from its name
	// read to its reply buffered (a SET's value streaming in included), for
	// the console's percentiles. Default: nil, commands are counted only.
	Latency func(time.Duration)
}

// Names finds keys that other nodes' front ends hold; in a cluster the
// server wires it to the cluster node.
type Names interface {
	// LookupName returns the key namespace/name as another node holds it,
	// or an error wrapping tier.ErrNotFound.
	LookupName(ctx context.Context, namespace, name string) (RemoteKey, error)
	// ReadName reads the key's block from the node that holds it,
	// checksum verified.
	ReadName(ctx context.Context, k RemoteKey) (*tier.Handle, error)
	// ForgetName tells every other node that namespace/name was written or
	// deleted here at generation gen, before the command is acknowledged:
	// each drops a value older than gen. dropped counts those that held
	// one; newer is true when one holds a later value (this write lost).
	ForgetName(ctx context.Context, namespace, name string, gen uint64) (dropped int, newer bool, err error)
	// ExpireName sets the deadline of k, held by another node, to
	// expireAtMs (0: none; past: delete), if that node still holds k's
	// generation; it reports whether it did.
	ExpireName(ctx context.Context, k RemoteKey, namespace, name string, expireAtMs int64) (bool, error)
}

// RemoteKey is a key held by another node.
type RemoteKey struct {
	Block      block.Key // the block holding the value
	Size       int64     // the value's length
	ExpireAtMs int64     // deadline in Unix milliseconds, 0 for none
	Node       uint32    // the node holding it
	Gen        uint64    // the value's generation (SET order across nodes)
}

// minKeyLen is the least room for keys a namespace must leave in a
// block's record: LMCache's keys are about 100 bytes.
const minKeyLen = 200

// DefaultNamespace is the default Options.Namespace.
func DefaultNamespace(tenant string) string { return tenant + "/redis" }

// EnsureDefaults fills in zero fields.
func (o *Options) EnsureDefaults() {
	if o.Namespace == nil {
		o.Namespace = DefaultNamespace
	}
	if o.MaxValueSize == 0 {
		o.MaxValueSize = 256 << 20
	}
	if o.MaxBulkLen == 0 {
		o.MaxBulkLen = max(512<<20, o.MaxValueSize)
	}
	if o.MaxRequestBytes == 0 {
		o.MaxRequestBytes = 1 << 20
	}
	if o.MaxArgs == 0 {
		o.MaxArgs = 1 << 20
	}
	if o.MaxConns == 0 {
		o.MaxConns = 10000
	}
	if o.StallTimeout == 0 {
		o.StallTimeout = 30 * time.Second
	}
	if o.Version == "" {
		o.Version = "devel"
	}
	if o.InlineMax == 0 {
		o.InlineMax = DefaultInlineMax
	}
	if o.InlineCapacity == 0 && o.Store != nil {
		if ts := o.Store.Tiers(); len(ts) > 0 {
			if _, inside := ts[0].(reserver); inside {
				o.InlineCapacity = ts[0].Stats().Capacity / 2
			} else {
				o.InlineCapacity = max(ts[0].Stats().Capacity/16, 16<<20)
			}
		} else {
			o.InlineCapacity = 16 << 20
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.sleep == nil {
		o.sleep = sleep
	}
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	var errs []error
	if o.Store == nil {
		errs = append(errs, errors.New("resp: Store is required"))
	}
	if o.Namespace != nil {
		ns := o.Namespace(auth.DefaultTenant)
		if err := block.ValidateNamespace(ns); err != nil {
			errs = append(errs, fmt.Errorf("resp: Namespace(%q): %w", auth.DefaultTenant, err))
		} else if block.Tenant(ns) != auth.DefaultTenant {
			errs = append(errs, fmt.Errorf("resp: Namespace(%q) = %q belongs to another tenant", auth.DefaultTenant, ns))
		} else if m := maxKeyLen(ns); m < minKeyLen {
			errs = append(errs, fmt.Errorf("resp: Namespace(%q) = %q leaves %d bytes for keys, fewer than %d", auth.DefaultTenant, ns, m, minKeyLen))
		}
	}
	if o.MaxValueSize <= 0 || o.MaxValueSize > block.MaxPayload {
		errs = append(errs, fmt.Errorf("resp: MaxValueSize %d must be in (0, %d]", o.MaxValueSize, int64(block.MaxPayload)))
	}
	if o.MaxBulkLen < o.MaxValueSize {
		errs = append(errs, fmt.Errorf("resp: MaxBulkLen %d must be at least MaxValueSize %d", o.MaxBulkLen, o.MaxValueSize))
	}
	if o.MaxRequestBytes < 4096 {
		errs = append(errs, fmt.Errorf("resp: MaxRequestBytes %d must be at least 4096", o.MaxRequestBytes))
	}
	if o.MaxArgs < 16 {
		errs = append(errs, fmt.Errorf("resp: MaxArgs %d must be at least 16", o.MaxArgs))
	}
	if o.MaxConns <= 0 {
		errs = append(errs, fmt.Errorf("resp: MaxConns %d must be positive", o.MaxConns))
	}
	if o.InlineMax > smallArg {
		errs = append(errs, fmt.Errorf("resp: InlineMax %d must be at most %d", o.InlineMax, smallArg))
	}
	if o.InlineMax > 0 && o.InlineCapacity <= 0 {
		errs = append(errs, fmt.Errorf("resp: InlineCapacity %d must be positive", o.InlineCapacity))
	}
	if o.EventLoops < 0 || o.EventLoops > 1024 {
		errs = append(errs, fmt.Errorf("resp: EventLoops %d must be in [0, 1024]", o.EventLoops))
	}
	if o.StallTimeout < 0 {
		errs = append(errs, fmt.Errorf("resp: StallTimeout %v must not be negative", o.StallTimeout))
	}
	return errors.Join(errs...)
}
