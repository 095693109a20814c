package policy

import (
	"fmt"
	"slices"
)

// Admission policies: which blocks leaving a tier are written to the tier
// below it (DRAM to SSD). See docs/policies.md for what each costs in
// flash writes and hits on the traces.
const (
	// AdmitAll writes every block the lower tier does not hold yet.
	AdmitAll = "all"
	// AdmitChain refuses the blocks a prefix cache cannot serve from below:
	// a chain's tail that no put has extended (a request's last, partial
	// block, whose hash the next turn does not repeat), and a block whose
	// chain parent no tier holds (a prefix hit stops at the parent). Blocks
	// put without a parent are admitted as by AdmitAll.
	AdmitChain = "chain"
	// AdmitLearned is AdmitChain that also refuses a new branch (the blocks
	// one put chain added after an existing prefix) of a kind that has
	// rarely come back: branches are classed by depth of nesting and length,
	// and a class is written while at least LearnedThreshold of its written
	// branches were read again from below. One refused branch in
	// learnedExplore is written anyway, so a class's estimate keeps moving.
	AdmitLearned = "learned"
	// AdmitReturns is AdmitChain that also refuses a new branch of a class
	// whose branches come back less often than branches do on the whole:
	// every branch evicted on its first use is judged, written or refused,
	// and counts as back when a later request reads it from any tier or
	// puts it again, so a refused class keeps its record without
	// exploratory writes. Classes are nesting (0, 1, 2 or more) by length
	// in powers of two up to 256 blocks; a class is written while the share
	// of its judged blocks that came back is at least ReturnsFactor times
	// the share over all classes. It is for an SSD smaller than the working
	// set: it refuses even while the SSD has room (docs/policies.md).
	AdmitReturns = "returns"
)

// AdmissionNames lists the admission policies, the default first.
var AdmissionNames = []string{AdmitAll, AdmitChain, AdmitLearned, AdmitReturns}

// LearnedThreshold is the share of a branch class's written branches that
// must have been read back for AdmitLearned to keep writing the class.
// With learnedExplore it was chosen by a sweep on the two traces (0.25 to
// 0.7, exploring 1 in 2 to 1 in 10 refusals), so it is fitted to them: 0.4
// and 1 in 4 halved the conversation trace's flash writes within a point
// of hit rate and kept the synthetic trace's hits; lower thresholds or
// more exploration wrote more, higher ones or less lost hits.
const LearnedThreshold = 0.4

// learnedExplore: one refused branch in this many is written anyway.
const learnedExplore = 4

// ReturnsFactor is how far above the share of all judged blocks that came
// back a class's own share must be for AdmitReturns to write it. 1.1 and
// 1.15 halve the flash writes of both traces at 3M DRAM + 10M SSD within a
// point of `all`'s hit rate; 1.0 writes 0.51-0.58 of `all`, 1.2 loses 1.2
// points on the conversation trace (docs/benchmarks.md).
const ReturnsFactor = 1.1

// returnsMinJudged is how many judged blocks a class needs before its own
// share decides; a class with fewer is written.
const returnsMinJudged = 4

// returnsAlways: a class whose share back is at least this is written.
// returnsMajority: a class holding more than this share of the judged
// blocks is written. Neither changes the traces' figures at 3M + 10M.
const (
	returnsAlways   = 0.5
	returnsMajority = 0.5
)

// Admission decides which blocks evicted from an upper tier are written to
// the lower one. The owner tells it about puts (with chain parents), reads,
// reads served from below and blocks the lower tier drops, and forgets a
// block once no tier holds it. It is not safe for concurrent use.
type Admission[K comparable] struct {
	name    string
	nodes   map[K]*admNode[K]
	classes map[branchClass]*classCount
	refused int // refused branches, for exploration
	// ghost remembers the uses of the blocks forgotten last (as many as
	// NewAdmission's ghost), so a block that comes back after leaving every
	// tier counts as used before, as the traces' returning blocks mostly are.
	ghost   *recent[K, ghostEntry]
	returns *returnsState[K] // AdmitReturns
}

type ghostEntry struct {
	uses     int
	extended bool
}

type admNode[K comparable] struct {
	parent    K
	hasParent bool
	extended  bool // a block was put with this one as its parent
	uses      int  // puts and reads since the block was first put
	// root is the first block of this block's branch; for the root itself,
	// branchLen counts the branch's blocks and depth its nesting.
	root      K
	isRoot    bool
	branchLen int
	depth     int
	written   bool // a root written below whose fate is not yet counted
}

type branchClass struct{ depth, length int }

type classCount struct{ back, lost float64 }

// NewAdmission returns the named policy, remembering up to ghost forgotten
// blocks (a few times what the lower tier holds: the traces' returning
// blocks come back within 4 times the SSD's blocks).
func NewAdmission[K comparable](name string, ghost int) (*Admission[K], error) {
	if !slices.Contains(AdmissionNames, name) {
		return nil, fmt.Errorf("%w: admission %q: want one of %v", ErrUnknownPolicy, name, AdmissionNames)
	}
	if ghost < 0 {
		return nil, fmt.Errorf("%w: admission ghost of %d blocks", ErrCapacity, ghost)
	}
	a := &Admission[K]{name: name, nodes: map[K]*admNode[K]{}, classes: map[branchClass]*classCount{},
		ghost: newRecent[K, ghostEntry](ghost)}
	if name == AdmitReturns {
		a.returns = newReturns[K](ghost)
	}
	return a, nil
}

// Name returns the policy's name.
func (a *Admission[K]) Name() string { return a.name }

// Put records that k was stored, after parent when hasParent. A block put
// again while known counts as a use.
func (a *Admission[K]) Put(k, parent K, hasParent bool) {
	if a.name == AdmitAll {
		return
	}
	if a.returns != nil {
		a.returns.back(k)
	}
	if n := a.nodes[k]; n != nil {
		n.uses++
		return
	}
	n := &admNode[K]{parent: parent, hasParent: hasParent, uses: 1, root: k, isRoot: true, branchLen: 1}
	if g, ok := a.ghost.take(k); ok {
		n.uses, n.extended = g.uses+1, g.extended
	}
	if p := a.nodes[parent]; hasParent && p != nil {
		p.extended = true
		// A block extending a block put once and not read since continues
		// that block's branch; one extending a block that was read (the hit
		// prefix of this put chain) starts a new branch nested in it.
		if p.uses == 1 {
			n.root, n.isRoot = p.root, false
			if r := a.nodes[p.root]; r != nil {
				r.branchLen++
			}
		} else if r := a.nodes[p.root]; r != nil {
			n.depth = r.depth + 1
		}
	}
	a.nodes[k] = n
}

// Extend records that a block is about to be put after parent: the owner
// calls it before a put that may evict parent to make room, since Put
// comes only once the block is stored.
func (a *Admission[K]) Extend(parent K) {
	if n := a.nodes[parent]; n != nil {
		n.extended = true
	}
}

// Access records a read of k from any tier.
func (a *Admission[K]) Access(k K) {
	if a.returns != nil {
		a.returns.back(k)
	}
	if n := a.nodes[k]; n != nil {
		n.uses++
	}
}

// Admit reports whether k, leaving the upper tier, is written below; held
// reports whether some tier holds a block.
func (a *Admission[K]) Admit(k K, held func(K) bool) bool {
	if a.name == AdmitAll {
		return true
	}
	n := a.nodes[k]
	if n == nil || !n.hasParent && !n.extended {
		return true // not part of a chain the policy knows
	}
	if !n.extended {
		return false // a tail: the next turn's prompt differs in this block
	}
	if n.hasParent && !held(n.parent) {
		return false // a prefix hit would stop before this block
	}
	if a.name == AdmitAll || a.name == AdmitChain || n.uses > 1 || !n.isRoot {
		return true
	}
	if a.returns != nil {
		return a.returns.judge(k, n.returnsClass(), n.branchLen)
	}
	c := a.classes[n.class()]
	if c == nil || (c.back+1)/(c.back+c.lost+2) >= LearnedThreshold {
		n.written = true
		return true
	}
	a.refused++
	if a.refused%learnedExplore == 0 {
		n.written = true
		return true
	}
	return false
}

// class buckets a root's branch by nesting (0, 1, 2 or more) and length
// (1, 2-3, 4-7, 8-15, 16 or more blocks).
func (n *admNode[K]) class() branchClass { return n.classUpTo(4) }

// classUpTo buckets a root's branch by nesting (0, 1, 2 or more) and
// log2 of its length, capped at top.
func (n *admNode[K]) classUpTo(top int) branchClass {
	l := 0
	for b := n.branchLen; b > 1 && l < top; b >>= 1 {
		l++
	}
	return branchClass{min(n.depth, 2), l}
}

// HitBelow records that k was read from the lower tier.
func (a *Admission[K]) HitBelow(k K) {
	a.settle(k, true)
}

// Dropped records that the lower tier no longer holds k.
func (a *Admission[K]) Dropped(k K) {
	a.settle(k, false)
}

func (a *Admission[K]) settle(k K, back bool) {
	n := a.nodes[k]
	if n == nil || !n.written {
		return
	}
	n.written = false
	c := a.classes[n.class()]
	if c == nil {
		c = &classCount{}
		a.classes[n.class()] = c
	}
	if back {
		c.back++
	} else {
		c.lost++
	}
}

// Forget drops what the policy knows of k, once no tier holds it.
func (a *Admission[K]) Forget(k K) {
	n := a.nodes[k]
	if n == nil {
		return
	}
	if n.written {
		a.settle(k, false)
	}
	delete(a.nodes, k)
	a.ghost.set(k, ghostEntry{uses: n.uses, extended: n.extended})
}

// Len returns how many blocks the policy knows.
func (a *Admission[K]) Len() int { return len(a.nodes) }
