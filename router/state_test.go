package router

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/yuebing/yuebing/scheduler"
)

// TestRouterEngineStateMachine: registration (the conductor API) and
// health (probes, failed requests) are two flags of one state, and the
// scheduler holds an engine exactly when both are set, whatever order they
// change in. Before, the API and the probes each changed the scheduler on
// their own and the router panicked on the first disagreement.
func TestRouterEngineStateMachine(t *testing.T) {
	r, err := New(Options{Model: testModel, Namespace: testNS, BlockSize: testBS,
		Engines: []Engine{{ID: "a", URL: "http://127.0.0.1:1"}, {ID: "b", URL: "http://127.0.0.1:2"}}})
	if err != nil {
		t.Fatal(err)
	}
	scheduled := func(id string) bool { _, err := r.d.Instance(id); return err == nil }
	check := func(what string, want bool) {
		t.Helper()
		if got := scheduled("a"); got != want {
			t.Fatalf("%s: a scheduled %v, want %v", what, got, want)
		}
	}
	a := scheduler.Instance{ID: "a", Role: scheduler.RolePrefill}

	// The panics of before: a deregistered engine goes down, comes back.
	if err := r.Deregister("a"); err != nil {
		t.Fatal(err)
	}
	r.markDown("a", errors.New("test"))
	r.markUp("a")
	check("deregistered, answering", false)
	if err := r.Register(a); err != nil {
		t.Fatal(err)
	}
	check("registered again", true)
	// Registered again while down: it rejoins when a probe answers.
	r.markDown("a", errors.New("test"))
	if err := r.Register(a); err != nil {
		t.Fatalf("registering a down engine: %v", err)
	}
	check("down, registered", false)
	r.markUp("a")
	check("up again", true)
	if err := r.Register(a); !errors.Is(err, scheduler.ErrDuplicate) {
		t.Fatalf("registering a scheduled engine: %v, want ErrDuplicate", err)
	}

	// Refused registrations: no engine without an address to forward to.
	for _, in := range []scheduler.Instance{
		{ID: "x9", Addr: "http://127.0.0.1:3", Role: scheduler.RolePrefill},
		{ID: "a", Addr: "http://127.0.0.1:3", Role: scheduler.RolePrefill},
		{ID: "a", Role: scheduler.RoleDecode},
	} {
		if err := r.Register(in); !errors.Is(err, scheduler.ErrInstance) {
			t.Errorf("Register(%+v): %v, want ErrInstance", in, err)
		}
	}
	if err := r.Register(scheduler.Instance{ID: "x9", Role: scheduler.RolePrefill}); !errors.Is(err, ErrUnknownEngine) {
		t.Errorf("an unknown engine: %v", err)
	}
	if err := r.Deregister("x9"); !errors.Is(err, scheduler.ErrUnknownInstance) {
		t.Errorf("Deregister(x9): %v, want ErrUnknownInstance", err)
	}
	if scheduled("x9") {
		t.Fatal("an unknown engine reached the scheduler")
	}

	// A pool store instance takes the id of an engine that is out: the
	// engine stays out, and nothing panics.
	r.markDown("a", errors.New("test"))
	if err := r.d.AddInstance(scheduler.Instance{ID: "a", Role: scheduler.RoleStore}); err != nil {
		t.Fatal(err)
	}
	r.markUp("a")
	if n, up := r.engines["a"].prefix(nil, 0); up || n != 0 {
		t.Fatal("an engine that could not rejoin the scheduler counts as up")
	}
	if err := r.d.RemoveInstance("a"); err != nil {
		t.Fatal(err)
	}
	r.markUp("a") // still down: this one joins
	check("after the store left", true)
}

// TestRouterEngineStateRandom drives both engines' flags in random order
// against a model of two booleans each; print the seed on failure.
func TestRouterEngineStateRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed))
	r, err := New(Options{Model: testModel, Namespace: testNS, BlockSize: testBS,
		Engines: []Engine{{ID: "a", URL: "http://127.0.0.1:1"}, {ID: "b", URL: "http://127.0.0.1:2", Role: RoleDecode},
			{ID: "c", URL: "http://127.0.0.1:3"}}})
	if err != nil {
		t.Fatal(err)
	}
	type model struct{ healthy, registered bool }
	m := map[string]*model{"a": {true, true}, "b": {true, true}}
	for i := range 2000 {
		id := []string{"a", "b"}[rng.IntN(2)]
		e := r.engines[id]
		st := m[id]
		switch op := rng.IntN(4); op {
		case 0:
			r.markDown(id, errors.New("test"))
			st.healthy = false
		case 1:
			r.markUp(id)
			st.healthy = true
		case 2:
			err := r.Register(scheduler.Instance{ID: id, Addr: e.URL, Role: e.role})
			if st.registered && st.healthy != errors.Is(err, scheduler.ErrDuplicate) || !st.registered && err != nil {
				t.Fatalf("seed %d op %d: Register(%s) = %v with %+v", seed, i, id, err, *st)
			}
			st.registered = true
		case 3:
			err := r.Deregister(id)
			if st.registered != (err == nil) {
				t.Fatalf("seed %d op %d: Deregister(%s) = %v with %+v", seed, i, id, err, *st)
			}
			st.registered = false
		}
		_, err := r.d.Instance(id)
		if got, want := err == nil, st.healthy && st.registered; got != want {
			t.Fatalf("seed %d op %d: %s scheduled %v, model %+v", seed, i, id, got, *st)
		}
	}
}
