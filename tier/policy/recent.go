package policy

// recent is a map that keeps only the last cap keys set, forgetting the
// oldest first: the admission policies' memory of forgotten blocks and of
// judged branches. A key set again, or deleted, keeps its old queue slot,
// which then expires nothing.
type recent[K comparable, V any] struct {
	m   map[K]recentEntry[V]
	q   []recentSlot[K]
	cap int
	seq uint64
}

type recentEntry[V any] struct {
	v   V
	seq uint64 // the queue slot that expires this entry
}

type recentSlot[K comparable] struct {
	k   K
	seq uint64
}

func newRecent[K comparable, V any](cap int) *recent[K, V] {
	return &recent[K, V]{m: map[K]recentEntry[V]{}, cap: cap}
}

// take returns k's value and forgets it.
func (r *recent[K, V]) take(k K) (V, bool) {
	e, ok := r.m[k]
	if ok {
		delete(r.m, k)
	}
	return e.v, ok
}

// set remembers v for k, forgetting the oldest keys past cap. With a cap
// of 0 it remembers nothing.
func (r *recent[K, V]) set(k K, v V) {
	if r.cap <= 0 {
		return
	}
	for len(r.q) >= r.cap {
		old := r.q[0]
		r.q = r.q[1:]
		if e, ok := r.m[old.k]; ok && e.seq == old.seq {
			delete(r.m, old.k)
		}
	}
	r.seq++
	r.m[k] = recentEntry[V]{v: v, seq: r.seq}
	r.q = append(r.q, recentSlot[K]{k, r.seq})
}

func (r *recent[K, V]) len() int { return len(r.m) }
