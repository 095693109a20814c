package policy

// returnsState is AdmitReturns's record: the branches judged lately, by
// root, and per class the blocks judged and the blocks that came back.
type returnsState[K comparable] struct {
	pending *recent[K, returnsJudged]
	cap     int
	classes map[branchClass]*returnsCount
	all     returnsCount
}

type returnsJudged struct {
	class  branchClass
	blocks int
}

// returnsCount counts blocks of judged branches and of those that came
// back. Counts are halved when all judged blocks pass twice the branches
// remembered, so old traffic fades at the pace the lower tier turns over.
type returnsCount struct{ judged, back float64 }

// newReturns remembers up to remember judged branches (the admission's
// ghost size: a few times the lower tier's blocks).
func newReturns[K comparable](remember int) *returnsState[K] {
	remember = max(remember, 1)
	return &returnsState[K]{pending: newRecent[K, returnsJudged](remember), cap: remember,
		classes: map[branchClass]*returnsCount{}}
}

// back records a request of k: a judged root read or put again is back.
func (r *returnsState[K]) back(k K) {
	j, ok := r.pending.take(k)
	if !ok {
		return
	}
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
	r.pending.set(k, returnsJudged{class: class, blocks: blocks})
	return admit
}

// returnsClass buckets a root's branch by nesting (0, 1, 2 or more) and
// length in powers of two (1, 2-3, ... 256 or more blocks): finer than
// class's, as the traces' wasted writes sit in branches of 32 to 255
// blocks on one and of 16 to 63 on the other.
func (n *admNode[K]) returnsClass() branchClass { return n.classUpTo(8) }
