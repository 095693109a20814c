package rdma

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
)

// Transport moves bytes between local memory and segments registered on
// peers. The package ships it as an interface because there are several
// (rdma/tcp, rdma/shm, and a verbs transport behind the "rdma" build tag on
// hardware that has it); rdma/rdmatest holds the conformance suite every
// implementation must pass.
//
// The Engine owns its transport: it calls Start once, then any of the other
// methods concurrently, then Close once.
type Transport interface {
	// Name is a short name for logs and reports, such as "tcp".
	Name() string
	// Start makes the local segments in env reachable by peers and records
	// the cluster token for outgoing connections. It returns once peers can
	// connect.
	Start(env Env) error
	// Addr is the address peers pass to OpenSegment to reach this
	// transport; valid after Start.
	Addr() string
	// Open resolves the segment called name on peer.
	Open(ctx context.Context, peer, name string) (Remote, error)
	// Transfer moves task.Local to or from the remote segment and returns
	// when every byte has moved or the transfer failed. When Transfer
	// returns, the transport no longer touches task.Local, whatever the
	// outcome: the caller may reuse the memory at once. The engine has
	// checked the ranges against both segments before the call. A failure
	// caused by ctx must wrap ctx.Err().
	Transfer(ctx context.Context, task *Task) error
	// Close stops serving peers, closes every connection and waits for the
	// transport's goroutines.
	Close() error
}

// Env is what an Engine hands its transport at Start.
type Env struct {
	// Segments are the local segments to serve.
	Segments *Registry
	// Token is the cluster token; peers must present the same.
	Token string
	// Logger receives connection-level events.
	Logger *slog.Logger
	// Blocks returns the source that answers peers' requests for blocks by
	// key (nil: none yet, every key is not held). Transports that are not
	// BlockGetters ignore it.
	Blocks func() BlockSource
}

// Remote is a transport's handle on a remote segment, made by Open.
type Remote interface {
	// Desc describes the remote segment.
	Desc() SegmentDesc
	// Close releases what the handle holds (a mapping, a connection). The
	// engine calls it once, after the last transfer that uses it.
	Close() error
}

// SegmentDesc describes a segment as its owner announces it.
type SegmentDesc struct {
	Name     string
	Location string
	Size     uint64
}

// Op is a transfer direction, seen from the initiator.
type Op uint8

// Ops. READ copies remote memory into local memory; WRITE the reverse.
const (
	Read Op = iota + 1
	Write
)

func (op Op) String() string {
	switch op {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return "op(" + strconv.Itoa(int(op)) + ")"
}

// Task is one request as a transport sees it.
type Task struct {
	Op Op
	// Local is the local range: the transport fills it (Read) or sends it
	// (Write), exactly these bytes.
	Local []byte
	// LocalLocation is the local segment's location tag, for choosing NICs.
	LocalLocation string
	// Remote is the handle Open returned.
	Remote Remote
	// RemoteOffset is where the range starts in the remote segment.
	RemoteOffset uint64

	moved atomic.Uint64
}

// Moved records n more bytes transferred, for status polling.
func (t *Task) Moved(n int) { t.moved.Add(uint64(n)) }

// Transferred returns the bytes recorded so far.
func (t *Task) Transferred() uint64 { return t.moved.Load() }
