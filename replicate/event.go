package replicate

import (
	"fmt"
	"time"

	"github.com/yuebing/yuebing/block"
)

// Event is an input of the Core: one of the types below, passed to Step.
// Events are facts, and repeating one is harmless.
type Event interface{ event() }

// NodeUp says a node is up, with its current figures. The first NodeUp of a
// node, or the first after a NodeDown, brings it into placement; later ones
// refresh its figures (send one per node every few seconds).
type NodeUp struct {
	Node uint32
	// Capacity and Free are the bytes of the node's cache and how many of
	// them are free (or could be freed without evicting anything useful).
	Capacity, Free int64
	// Load is how busy the node is, 0 idle to 1 saturated (above 1:
	// overloaded), as the node measures it, e.g. the busier of its NIC and
	// its request queue.
	Load float64
}

// NodeDown says a node is gone (its lease lapsed). Its replicas no longer
// count, actions involving it are taken as failed, and blocks that fall below
// their replica count are repaired from surviving copies.
type NodeDown struct {
	Node uint32
}

// Hits reports accesses to blocks by one node: each key in Keys was used by a
// request on Node, whether Node holds it or fetched it. Counts, when not nil,
// gives the hits of each key (the same length as Keys); otherwise each listed
// key counts once. Nodes are expected to batch, e.g. one Hits a second.
type Hits struct {
	Node   uint32
	Keys   []block.Key
	Counts []uint32
}

// Added says Node now holds Key in tier Tier; Size is the block's length in
// bytes, 0 if unknown.
type Added struct {
	Node uint32
	Key  block.Key
	Tier uint8
	Size int64
}

// Removed says Node no longer holds Key in tier Tier.
type Removed struct {
	Node uint32
	Key  block.Key
	Tier uint8
}

// SetReplicas sets the number of replicas Key should have, at least 1: the
// replica_num of a put, or a change of it (Mooncake's change_replica).
// Count 1 is the default, which every block has until told otherwise.
type SetReplicas struct {
	Key   block.Key
	Count int
}

// Pin marks Key as part of a pinned context until Until (a zero Until
// unpins): pinned blocks are repaired first and dropped last under pressure.
type Pin struct {
	Key   block.Key
	Until time.Time
}

// Pressure says Node needs Bytes freed; 0 says the pressure is over. Each
// report replaces the last. The core answers with drops of replicas the
// cluster can spare (blocks above their desired count, coldest first) until
// their sizes cover Bytes, and copies nothing to the node until it reports 0.
type Pressure struct {
	Node  uint32
	Bytes int64
}

// Done acknowledges the action with ID: it completed, or failed with Err.
// Unknown ids (acknowledged twice, or already timed out) are ignored.
type Done struct {
	ID  uint64
	Err error
}

func (NodeUp) event()      {}
func (NodeDown) event()    {}
func (Hits) event()        {}
func (Added) event()       {}
func (Removed) event()     {}
func (SetReplicas) event() {}
func (Pin) event()         {}
func (Pressure) event()    {}
func (Done) event()        {}

// Kind is what an action does.
type Kind uint8

const (
	// Copy copies Key from node From to node Node.
	Copy Kind = iota + 1
	// Drop deletes Node's copy of Key.
	Drop
)

func (k Kind) String() string {
	switch k {
	case Copy:
		return "copy"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Reason says why an action was decided, for logs and metrics.
type Reason uint8

const (
	// ReasonRepair: the block has fewer replicas than its desired count,
	// because a holder was lost or the count was raised.
	ReasonRepair Reason = iota + 1
	// ReasonHot: the block's heat asks for more replicas.
	ReasonHot
	// ReasonCooled: the block has had more replicas than it needs for
	// Options.Cooldown, because it cooled down or its count was lowered.
	ReasonCooled
	// ReasonPressure: the node asked for memory, and the block has more
	// replicas than its desired count.
	ReasonPressure
)

func (r Reason) String() string {
	switch r {
	case ReasonRepair:
		return "repair"
	case ReasonHot:
		return "hot"
	case ReasonCooled:
		return "cooled"
	case ReasonPressure:
		return "pressure"
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Action is an output of the Core, to be executed and then acknowledged with
// Done{ID: ...}.
type Action struct {
	// ID identifies the action in its Done.
	ID   uint64
	Kind Kind
	Key  block.Key
	// Node is the node that gains a replica (Copy) or loses one (Drop).
	Node uint32
	// From is the source of a Copy.
	From   uint32
	Reason Reason
}

func (a Action) String() string {
	if a.Kind == Copy {
		return fmt.Sprintf("#%d copy %x %d->%d (%s)", a.ID, a.Key[:4], a.From, a.Node, a.Reason)
	}
	return fmt.Sprintf("#%d drop %x @%d (%s)", a.ID, a.Key[:4], a.Node, a.Reason)
}
