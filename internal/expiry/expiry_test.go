package expiry

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHeapOrder(t *testing.T) {
	var h Heap[int]
	r := rand.New(rand.NewPCG(1, 2))
	var want []int64
	for i := range 500 {
		at := r.Int64N(1000)
		h.Push(at, i)
		want = append(want, at)
	}
	slices.Sort(want)
	if _, _, ok := h.PopDue(want[0] - 1); ok {
		t.Fatal("popped an entry that is not due")
	}
	var got []int64
	for {
		_, at, ok := h.PopDue(2000)
		if !ok {
			break
		}
		got = append(got, at)
	}
	if !slices.Equal(got, want) || h.Len() != 0 {
		t.Fatalf("popped %d entries out of order or left some", len(got))
	}
}
