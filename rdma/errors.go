package rdma

import "errors"

var (
	// ErrClosed reports a call on a closed engine, segment or transport.
	ErrClosed = errors.New("rdma: closed")
	// ErrInvalidRequest reports a malformed request or argument: a zero
	// length, an unknown op, a nil or foreign segment.
	ErrInvalidRequest = errors.New("rdma: invalid request")
	// ErrOutOfRange reports a range that is not inside a registered segment,
	// on either side of a transfer.
	ErrOutOfRange = errors.New("rdma: range outside registered segment")
	// ErrSegmentNotFound reports an unknown (or unregistered) segment.
	ErrSegmentNotFound = errors.New("rdma: segment not found")
	// ErrSegmentExists reports a name that is already registered.
	ErrSegmentExists = errors.New("rdma: segment already registered")
	// ErrNotShared reports a segment that a shared-memory peer cannot map
	// because it was not registered as SharedMemory.
	ErrNotShared = errors.New("rdma: segment is not shared memory")
	// ErrBusy reports a resource still in use: a batch with pending
	// requests, a segment with transfers in flight, a peer at its
	// connection limit.
	ErrBusy = errors.New("rdma: busy")
	// ErrBatchFull reports a submit beyond a batch's capacity.
	ErrBatchFull = errors.New("rdma: batch full")
	// ErrTooManyBatches reports an allocation beyond Options.MaxBatches.
	ErrTooManyBatches = errors.New("rdma: too many batches")
	// ErrAuth reports a peer that did not present the cluster token.
	ErrAuth = errors.New("rdma: authentication failed")
	// ErrVersion reports a peer with no protocol version in common.
	ErrVersion = errors.New("rdma: no common protocol version")
	// ErrProtocol reports a malformed, truncated or unexpected frame.
	ErrProtocol = errors.New("rdma: protocol error")
	// ErrChecksum reports a slice whose CRC-32C does not match its bytes.
	ErrChecksum = errors.New("rdma: checksum mismatch")
	// ErrNoPath reports a transfer that failed because every path to the
	// peer is down.
	ErrNoPath = errors.New("rdma: no path left to peer")
	// ErrTimeout reports a request whose deadline passed before it completed.
	ErrTimeout = errors.New("rdma: transfer deadline exceeded")
)
