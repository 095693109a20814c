package policy

// returnsState is AdmitReturns's record: the branches judged lately, by
// root, and per class the blocks judged and the blocks that came back.
type returnsState[K comparable] struct {
	pending map[K]returnsJudged
	queue   []returnsSlot[K] // judgement order, to bound pending
	cap     int
	seq     uint64
	classes map[branchClass]*returnsCount
	all     returnsCount
}

type returnsJudged struct {
	class  branchClass
	blocks int
	seq    uint64
}

type returnsSlot[K comparable] struct {
	k   K
	seq uint64
}

// returnsCount counts blocks of judged branches and of those that came
// back. Counts are halved when all judged blocks pass decayAt, so old
// traffic fades at the pace the lower tier turns over.
type returnsCount struct{ judged, back float64 }

// newReturns remembers up to remember judged branches (the admission's
// ghost size: a few times the lower tier's blocks).
func newReturns[K comparable](remember int) *returnsState[K] {
	return &returnsState[K]{pending: map[K]returnsJudged{}, cap: max(remember, 1),
		classes: map[branchClass]*returnsCount{}}
}

// back records a request of k: a judged root read or put again is back.
func (r *returnsState[K]) back(k K) {
	j, ok := r.pending[k]
	if !ok {
		return
	}
	delete(r.pending, k) // its queue slot then expires nothing
	b := float64(j.blocks)
	if c := r.classes[j.class]; c != nil {
		c.back += b
	}
	r.all.back += b
}

// judge decides on a root leaving the upper tier on its first use, and
// records it either way.
func (r *returnsState[K]) judge(k K, class branchClass, blocks int) bool {
	c := r.classes[class]
	if c == nil {
		c = &returnsCount{}
		r.classes[class] = c
	}
	admit := true
	// A class that comes back more often than not, or that holds most of
	// the judged blocks (it is the mean it would be compared with), is
	// written whatever the others do: the rule ranks kinds of branches, and
	// refusing a whole workload of one kind would only lose its hits.
	if c.judged >= returnsMinJudged && r.all.judged > 0 && c.back < returnsAlways*c.judged &&
		c.judged <= returnsMajority*r.all.judged {
		admit = c.back*r.all.judged >= ReturnsFactor*r.all.back*c.judged
	}
	b := float64(blocks)
	c.judged += b
	r.all.judged += b
	if r.all.judged > 2*float64(r.cap) {
		r.all.judged, r.all.back = r.all.judged/2, r.all.back/2
		for _, x := range r.classes {
			x.judged, x.back = x.judged/2, x.back/2
		}
	}
	for len(r.queue) >= r.cap {
		old := r.queue[0]
		r.queue = r.queue[1:]
		if j, ok := r.pending[old.k]; ok && j.seq == old.seq {
			delete(r.pending, old.k)
		}
	}
	r.seq++
	r.pending[k] = returnsJudged{class: class, blocks: blocks, seq: r.seq}
	r.queue = append(r.queue, returnsSlot[K]{k, r.seq})
	return admit
}

// returnsClass buckets a root's branch by nesting (0, 1, 2 or more) and
// length in powers of two (1, 2-3, ... 256 or more blocks): finer than
// class's, as the traces' wasted writes sit in branches of 32 to 255
// blocks on one and of 16 to 63 on the other.
func (n *admNode[K]) returnsClass() branchClass {
	l := 0
	for b := n.branchLen; b > 1 && l < 8; b >>= 1 {
		l++
	}
	return branchClass{min(n.depth, 2), l}
}
