package rdma

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	s, err := r.add("kv", "cpu:0", make([]byte, 100), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.add("kv", "cpu:0", make([]byte, 1), nil); !errors.Is(err, ErrSegmentExists) {
		t.Errorf("duplicate name: %v", err)
	}
	for _, bad := range []struct{ name, loc string }{{"", "cpu:0"}, {"x", ""}, {string(make([]byte, MaxNameLen+1)), "cpu:0"}} {
		if _, err := r.add(bad.name, bad.loc, make([]byte, 1), nil); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("add(%q, %q): %v", bad.name, bad.loc, err)
		}
	}
	if _, err := r.add("empty", "cpu:0", nil, nil); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("empty memory: %v", err)
	}
	s2, _ := r.add("other", "cpu:1", make([]byte, 1), nil)
	if s.ID() == s2.ID() || s.ID()>>32 != s2.ID()>>32 {
		t.Errorf("IDs %#x and %#x: want distinct, same epoch", s.ID(), s2.ID())
	}
	if _, err := r.Acquire(s.ID() + 1000); !errors.Is(err, ErrSegmentNotFound) {
		t.Errorf("unknown ID: %v", err)
	}

	// A pinned segment: unregistering waits for the pin and gives up with
	// ErrBusy when its context ends; meanwhile it is gone for new users.
	pinned, err := r.Acquire(s.ID())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := r.remove(ctx, "kv"); !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("remove while pinned: %v", err)
	}
	if _, err := r.Acquire(s.ID()); !errors.Is(err, ErrSegmentNotFound) {
		t.Errorf("Acquire while unregistering: %v", err)
	}
	if _, err := r.Lookup("kv"); !errors.Is(err, ErrSegmentNotFound) {
		t.Errorf("Lookup while unregistering: %v", err)
	}
	done := make(chan error)
	go func() { done <- r.remove(t.Context(), "kv") }()
	pinned.Release()
	if err := <-done; err != nil {
		t.Fatalf("remove after release: %v", err)
	}
	if r.Len() != 1 {
		t.Errorf("Len = %d", r.Len())
	}
	if _, err := r.add("kv", "cpu:0", make([]byte, 1), nil); err != nil {
		t.Errorf("name not free after unregister: %v", err)
	}
}

func TestPinsReleaseTooOftenPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	var p pins
	p.release()
}

func TestSharedMemory(t *testing.T) {
	m, err := NewSharedMemory("test", 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.Bytes()) != 8192 {
		t.Fatalf("len %d", len(m.Bytes()))
	}
	m.Bytes()[8191] = 1
	// Sealed: nobody holding the descriptor may shrink it under a mapping.
	if err := m.File().Truncate(4096); err == nil {
		t.Fatal("shrinking sealed shared memory succeeded")
	}
	if _, err := NewSharedMemory("bad", 0); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("zero size: %v", err)
	}
}
