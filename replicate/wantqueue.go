package replicate

import "bytes"

// wantQueue is a heap of blocks needing copies: pinned repairs, repairs, then
// hot blocks; by heat within a class, then by key.
type wantQueue []qitem

type qitem struct {
	b     *blockState
	class int
	heat  uint32
}

func (q wantQueue) Len() int { return len(q) }
func (q wantQueue) Less(i, j int) bool {
	if q[i].class != q[j].class {
		return q[i].class < q[j].class
	}
	if q[i].heat != q[j].heat {
		return q[i].heat > q[j].heat
	}
	return bytes.Compare(q[i].b.key[:], q[j].b.key[:]) < 0
}
func (q wantQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *wantQueue) Push(x any)   { *q = append(*q, x.(qitem)) }
func (q *wantQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = qitem{}
	*q = old[:len(old)-1]
	return it
}
