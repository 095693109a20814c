package policy

import (
	"errors"
	"slices"
	"testing"
)

func TestLRUOrder(t *testing.T) {
	p := NewLRU[int]()
	for k := 1; k <= 4; k++ {
		p.Add(k, Info[int]{})
	}
	p.Access(1) // order, most recent first: 1 4 3 2
	p.Access(99)
	var got []int
	pinned := func(k int) bool { return k != 2 }
	if k, ok := p.Evict(pinned); !ok || k != 3 {
		t.Fatalf("Evict skipping 2 = %d, %v; want 3", k, ok)
	}
	for p.Len() > 0 {
		k, _ := p.Evict(nil)
		got = append(got, k)
	}
	if !slices.Equal(got, []int{2, 4, 1}) {
		t.Fatalf("eviction order %v, want [2 4 1]", got)
	}
	if _, ok := p.Evict(nil); ok {
		t.Fatal("Evict on an empty policy succeeded")
	}
	p.Add(5, Info[int]{})
	p.Remove(5)
	p.Remove(5)
	if p.Len() != 0 {
		t.Fatal("Remove did not forget the key")
	}
	if _, ok := p.Evict(func(int) bool { return false }); ok {
		t.Fatal("Evict returned a non-evictable key")
	}
}

func TestNew(t *testing.T) {
	for _, name := range Names {
		if _, err := New[string](name, 10); err != nil {
			t.Errorf("New(%q): %v", name, err)
		}
	}
	if _, err := New[string]("nope", 10); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("New of an unknown policy: %v, want ErrUnknownPolicy", err)
	}
}
