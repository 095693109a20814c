package cluster

import "errors"

var (
	// ErrBadReport: a node's report that does not decode (bad framing,
	// checksum, counts).
	ErrBadReport = errors.New("cluster: malformed report")
	// ErrNoLeader: no leader is known right now (an election is under way,
	// or etcd cannot be reached). Retry shortly.
	ErrNoLeader = errors.New("cluster: no leader")
	// ErrNotLeader: the node asked is not the leader of the term the caller
	// named; the caller refreshes its view of the leader.
	ErrNotLeader = errors.New("cluster: not the leader")
	// ErrResync: the leader needs the node's full state before any delta.
	ErrResync = errors.New("cluster: full resync needed")
	// ErrNotMember: a node id that is not registered in the cluster.
	ErrNotMember = errors.New("cluster: not a member")
	// ErrLastCopy: a drop refused because it would remove the last copy of
	// a block.
	ErrLastCopy = errors.New("cluster: refusing to drop the last copy")
	// ErrBusy: a bound on fetches or exposed blocks is reached.
	ErrBusy = errors.New("cluster: busy")
	// ErrUnauthorized: an internal request without the cluster token.
	ErrUnauthorized = errors.New("cluster: unauthorized")
	// ErrBadRequest: an internal request that is malformed.
	ErrBadRequest = errors.New("cluster: bad request")
	// ErrClosed: the node left the cluster.
	ErrClosed = errors.New("cluster: closed")
	// ErrBadRecord: a member record or campaign in etcd that is not
	// sealed with the cluster token; the node ignores it.
	ErrBadRecord = errors.New("cluster: record not signed with the cluster token")
	// ErrIDsExhausted: every node id below Options.MaxNodes is taken by a
	// node name.
	ErrIDsExhausted = errors.New("cluster: no free node id")
)

// ErrUnreachable: a node did not answer within Options.PeerTimeout (it
// died, froze, or the network dropped it). Reads pass over it to the next
// holder.
var ErrUnreachable = errors.New("cluster: node did not answer")

// ErrNameInUse: another live node registered this node's name.
var ErrNameInUse = errors.New("cluster: node name in use")
