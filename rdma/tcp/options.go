package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/yuebing/yuebing/rdma"
)

// DefaultListen is the transfer service's address when the topology names
// none.
const DefaultListen = "127.0.0.1:7070"

// Options configure a TCP transport. Zero fields mean their defaults.
type Options struct {
	// Topology names this node's NICs per memory location. A NIC is a
	// "host:port": the transport listens there, and binds outgoing
	// connections to its host, so each path is a real (local, remote)
	// address pair. Port 0 picks a free port. Default: one NIC,
	// DefaultListen, for every location.
	Topology rdma.Topology
	// SliceSize is the most bytes one frame carries; larger requests are
	// cut into slices spread over the paths. Default 1 MiB (at most
	// MaxSliceSize). Larger slices
	// cost fewer frames, system calls and wake-ups (throughput), smaller
	// ones spread a request over more paths sooner (latency);
	// docs/benchmarks.md measures the trade: on loopback 1 MiB slices moved
	// more than 64 KiB and 4 MiB ones.
	SliceSize int
	// MaxSliceSize is the largest slice this node accepts from a peer, and
	// so the most memory one peer frame can claim. Default 16 MiB.
	MaxSliceSize int
	// Depth is how many slices may wait on one connection. Default 16.
	Depth int
	// Window is how many slices of one request may be in flight at once.
	// Default 32.
	Window int
	// MaxEndpoints bounds pooled outgoing connections; beyond it the pool
	// evicts by SIEVE. Default 256.
	MaxEndpoints int
	// MaxConns bounds incoming connections; more are refused. Default 1024.
	MaxConns int
	// IdleStreams bounds the connections to one peer kept open between
	// reads of blocks by key (GetBlocks); one stream holds a connection to
	// itself while it is read. Default 16.
	IdleStreams int
	// DialTimeout bounds connecting plus the handshake. Default 5s.
	DialTimeout time.Duration
	// IOTimeout bounds moving one frame, and how long a connection may
	// stay silent while slices wait on it before it counts as broken.
	// Default 10s.
	IOTimeout time.Duration
	// BackoffMin and BackoffMax bound how long a failed path stays down;
	// the time doubles with each failure in a row. Defaults 100ms and 10s.
	BackoffMin, BackoffMax time.Duration
	// Dial opens a connection from local ("" for any) to remote. Default: a
	// net.Dialer bound to local's host. Tests use it to cut connections.
	Dial func(ctx context.Context, local, remote string) (net.Conn, error)
}

// EnsureDefaults fills zero fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if len(o.Topology) == 0 {
		o.Topology = rdma.Topology{rdma.AnyLocation: {Preferred: []string{DefaultListen}}}
	}
	if o.SliceSize == 0 {
		o.SliceSize = 1 << 20
		if o.MaxSliceSize > 0 {
			o.SliceSize = min(o.SliceSize, o.MaxSliceSize)
		}
	}
	if o.MaxSliceSize == 0 {
		o.MaxSliceSize = max(16<<20, o.SliceSize)
	}
	if o.Depth == 0 {
		o.Depth = 16
	}
	if o.Window == 0 {
		o.Window = 32
	}
	if o.MaxEndpoints == 0 {
		o.MaxEndpoints = 256
	}
	if o.MaxConns == 0 {
		o.MaxConns = 1024
	}
	if o.IdleStreams == 0 {
		o.IdleStreams = 16
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.IOTimeout == 0 {
		o.IOTimeout = 10 * time.Second
	}
	if o.BackoffMin == 0 {
		o.BackoffMin = 100 * time.Millisecond
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = max(10*time.Second, o.BackoffMin)
	}
	if o.Dial == nil {
		o.Dial = dial
	}
	return o
}

// maxSlice is the wire limit on a slice: the length field is 32 bits.
const maxSlice = 1<<32 - 1

// Validate reports every invalid field at once.
func (o *Options) Validate() error {
	var errs []error
	if err := o.Topology.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, nic := range o.Topology.All() {
		if _, _, err := net.SplitHostPort(nic); err != nil {
			errs = append(errs, fmt.Errorf("tcp: NIC %q is not host:port: %w", nic, err))
		}
	}
	if o.SliceSize <= 0 || o.SliceSize > maxSlice {
		errs = append(errs, fmt.Errorf("tcp: SliceSize %d not in [1, %d]", o.SliceSize, maxSlice))
	}
	if o.MaxSliceSize < o.SliceSize || o.MaxSliceSize > maxSlice {
		errs = append(errs, fmt.Errorf("tcp: MaxSliceSize %d not in [SliceSize, %d]", o.MaxSliceSize, maxSlice))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Depth", o.Depth}, {"Window", o.Window}, {"MaxEndpoints", o.MaxEndpoints}, {"MaxConns", o.MaxConns}, {"IdleStreams", o.IdleStreams}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("tcp: %s %d must be positive", f.name, f.v))
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"DialTimeout", o.DialTimeout}, {"IOTimeout", o.IOTimeout}, {"BackoffMin", o.BackoffMin}, {"BackoffMax", o.BackoffMax}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("tcp: %s %v must be positive", f.name, f.v))
		}
	}
	if o.BackoffMax < o.BackoffMin {
		errs = append(errs, fmt.Errorf("tcp: BackoffMax %v below BackoffMin %v", o.BackoffMax, o.BackoffMin))
	}
	return errors.Join(errs...)
}

func dial(ctx context.Context, local, remote string) (net.Conn, error) {
	var d net.Dialer
	if local != "" {
		host, _, err := net.SplitHostPort(local)
		if err != nil {
			return nil, err
		}
		ip := net.ParseIP(host)
		if ip == nil {
			return nil, fmt.Errorf("tcp: local NIC %q is not an IP address", local)
		}
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	return d.DialContext(ctx, "tcp", remote)
}
