package server

import (
	"fmt"
	"net/http"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/policy"
)

// AdmissionConfig is the SSD write admission of ssd's section: which
// blocks the DRAM tier evicts are written to SSD (docs/policies.md,
// "admission"). chain and learned judge a block by its prefix chain, which
// the node learns from the puts' X-Yuebing-Parent and X-Yuebing-Chain
// headers, multi-put frames' own parents and shared-memory items'
// "parent"; puts without any are admitted as under all.
type AdmissionConfig struct {
	// Admission is all (default: every evicted block), chain or learned.
	Admission string `yaml:"admission"`
	// AdmissionGhost is how many blocks gone from every tier the policy
	// remembers. Default (0): the tier's, 65536.
	AdmissionGhost int `yaml:"admission_ghost"`
}

// validate reports a policy the tier does not know or a negative ghost
// size, naming the setting.
func (a AdmissionConfig) validate(bad func(field, format string, args ...any)) {
	switch a.Admission {
	case "", policy.AdmitAll, policy.AdmitChain, policy.AdmitLearned, policy.AdmitReturns:
	default:
		bad("ssd.admission", "%q: want %s, %s, %s or %s", a.Admission, policy.AdmitAll, policy.AdmitChain, policy.AdmitLearned, policy.AdmitReturns)
	}
	if a.AdmissionGhost < 0 {
		bad("ssd.admission_ghost", "%d must not be negative", a.AdmissionGhost)
	}
}

// apply sets the hierarchy's admission options.
func (a AdmissionConfig) apply(o *tier.HierarchyOptions) {
	o.Admission, o.AdmissionGhost = a.Admission, a.AdmissionGhost
}

// Chain headers of a put: how a node learns the blocks' chain parents,
// which the chain and learned admission policies judge by.
const (
	// HeaderParent is the key (block.Key's text form) of the block before
	// this one in its prefix chain: on a single put, that block's parent;
	// on a batch put with HeaderChain, the first frame's.
	HeaderParent = "X-Yuebing-Parent"
	// HeaderChain "1" on a batch put says its frames are one chain in
	// order: frame i's parent is frame i-1. "0" or absent: no parents.
	// A frame carrying its own parent (frame.FlagParent) has that one
	// either way, and so does a shared-memory put item's "parent".
	HeaderChain = "X-Yuebing-Chain"
)

// parentHeader reads HeaderParent; errors wrap ErrBadRequest and name it.
func parentHeader(h http.Header) (key block.Key, ok bool, err error) {
	v := h.Get(HeaderParent)
	if v == "" {
		return key, false, nil
	}
	if key, err = block.ParseKey(v); err != nil {
		return key, false, fmt.Errorf("%w: %s: %v", ErrBadRequest, HeaderParent, err)
	}
	return key, true, nil
}

// chainHeader reads HeaderChain; errors wrap ErrBadRequest and name it.
func chainHeader(h http.Header) (bool, error) {
	switch v := h.Get(HeaderChain); v {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, fmt.Errorf("%w: %s %q: want 1 or 0", ErrBadRequest, HeaderChain, v)
	}
}
