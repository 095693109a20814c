package scheduler

import (
	"fmt"
	"time"
)

// Role is what an instance does.
type Role uint8

const (
	// RolePrefill instances run prefills; they are Algorithm 1's pool P.
	RolePrefill Role = iota + 1
	// RoleDecode instances run decode batches; pool D.
	RoleDecode
	// RoleStore instances only hold blocks (a yuebing store node, a
	// global pool): prefill instances may pull a prefix from them, but no
	// request runs on them.
	RoleStore
)

var roleNames = [...]string{RolePrefill: "prefill", RoleDecode: "decode", RoleStore: "store"}

func (r Role) String() string {
	if r >= RolePrefill && int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole parses "prefill", "decode" or "store".
func ParseRole(s string) (Role, error) {
	for r := RolePrefill; int(r) < len(roleNames); r++ {
		if roleNames[r] == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("%w: role %q, want prefill, decode or store", ErrInstance, s)
}

// MarshalText implements encoding.TextMarshaler.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Instance describes a registered instance.
type Instance struct {
	// ID names the instance: 1-128 characters of [A-Za-z0-9._:-].
	ID string `json:"id"`
	// Addr is where engines reach it; the conductor only reports it.
	Addr string `json:"addr,omitempty"`
	Role Role   `json:"role"`
	// Capacity is in KV tokens: the cache of a prefill or store instance
	// (informational), the KV a decode instance holds before it must swap
	// (0 means DefaultDecodeCapacity).
	Capacity int64 `json:"capacity,omitempty"`
}

// Validate checks the registration.
func (in Instance) Validate() error {
	if in.ID == "" || len(in.ID) > 128 {
		return fmt.Errorf("%w: id %q must be 1-128 characters", ErrInstance, in.ID)
	}
	for i := 0; i < len(in.ID); i++ {
		c := in.ID[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("%w: id %q: character %q at %d is not one of [A-Za-z0-9._:-]", ErrInstance, in.ID, c, i)
		}
	}
	if len(in.Addr) > 256 {
		return fmt.Errorf("%w: addr longer than 256 bytes", ErrInstance)
	}
	if in.Role < RolePrefill || int(in.Role) >= len(roleNames) {
		return fmt.Errorf("%w: role %d, want prefill, decode or store", ErrInstance, in.Role)
	}
	if in.Capacity < 0 || in.Capacity > 1<<50 {
		return fmt.Errorf("%w: capacity %d tokens out of range", ErrInstance, in.Capacity)
	}
	return nil
}

// Load is what an instance reports about itself in a heartbeat. It replaces
// the conductor's own bookkeeping for that instance, which until the next
// heartbeat adds what the conductor scheduled there on top.
type Load struct {
	// QueueTime is the prefill work queued and running (prefill instances).
	QueueTime time.Duration `json:"queue_time"`
	// Batch and KVTokens describe the running decode batch (decode instances).
	Batch    int   `json:"batch"`
	KVTokens int64 `json:"kv_tokens"`
}

// instance is an instance's live state inside the Core.
type instance struct {
	Instance
	slot int

	// queueEnd is when the prefill work queued on it is predicted to be
	// done: the queue time at now is max(0, queueEnd-now).
	queueEnd time.Duration

	// The decode batch: what the last heartbeat reported at baseAt, plus
	// the requests scheduled here since (members), both those still in
	// prefill and those that joined the batch.
	baseBatch int
	baseKV    int64
	baseAt    time.Duration
	members   []*flight

	scheduled     int64 // requests sent here
	lastHeartbeat time.Duration
}

// flight is an accepted request the core still tracks.
type flight struct {
	id      string
	prefill *instance
	decode  *instance // nil when no decode instance is registered
	kv      int64     // KV tokens it holds while decoding: input + output
	// prefillEnd is when its prefill is predicted to end, or did end once
	// prefilled is set; it joins its decode batch then.
	prefillEnd time.Duration
	prefilled  bool
}

// joinedBy reports whether the request is in its decode batch at t.
func (f *flight) joinedBy(t time.Duration) bool { return f.prefilled || f.prefillEnd <= t }

func (in *instance) queueTime(now time.Duration) time.Duration {
	return max(in.queueEnd-now, 0)
}

func (in *instance) decodeCapacity() int64 {
	if in.Capacity > 0 {
		return in.Capacity
	}
	return DefaultDecodeCapacity
}

func (in *instance) removeMember(f *flight) {
	for i, m := range in.members {
		if m == f {
			last := len(in.members) - 1
			in.members[i] = in.members[last]
			in.members[last] = nil
			in.members = in.members[:last]
			return
		}
	}
}
