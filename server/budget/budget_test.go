package budget

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func newBudget(t *testing.T, capacity int64, wait time.Duration) *Budget {
	t.Helper()
	b, err := New(Options{Capacity: capacity, Wait: wait, Name: "limits.max_inflight_bytes"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string // "" for valid
	}{
		{Options{Capacity: 1}, ""},
		{Options{Capacity: 0}, "Capacity 0 must be positive"},
		{Options{Capacity: -5}, "Capacity -5 must be positive"},
		{Options{Capacity: 10, Wait: -time.Second}, "Wait -1s must not be negative"},
	} {
		_, err := New(tc.opts)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("New(%+v) = %v, want no error", tc.opts, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("New(%+v) = %v, want %q", tc.opts, err, tc.want)
		}
	}
}

func TestAcquireRelease(t *testing.T) {
	b := newBudget(t, 100, time.Second)
	u := b.User("http")
	if b.User("http") != u {
		t.Fatal("User with the same name returned another handle")
	}
	r1, err := u.Acquire(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	r2, ok := b.User("resp").TryAcquire(40)
	if !ok {
		t.Fatal("TryAcquire of the last 40 bytes failed")
	}
	if got := b.InUse(); got != 100 {
		t.Fatalf("InUse = %d, want 100", got)
	}
	if _, ok := u.TryAcquire(1); ok {
		t.Fatal("TryAcquire beyond the capacity succeeded")
	}
	r1()
	r1() // a second call must not give the bytes back twice
	if got := b.InUse(); got != 40 {
		t.Fatalf("InUse after release = %d, want 40", got)
	}
	if _, ok := u.TryAcquire(61); ok {
		t.Fatal("a double release freed bytes that are still held")
	}
	r2()
	zero, err := u.Acquire(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	zero()
	st := b.Stats()
	want := Stats{Capacity: 100, InUse: 0, Users: []UserStats{
		{Name: "http", Admitted: 1, Rejections: 2},
		{Name: "resp", Admitted: 1},
	}}
	if !equalStats(st, want) {
		t.Fatalf("Stats = %+v, want %+v", st, want)
	}
}

func equalStats(a, b Stats) bool {
	if a.Capacity != b.Capacity || a.InUse != b.InUse || len(a.Users) != len(b.Users) {
		return false
	}
	for i := range a.Users {
		if a.Users[i] != b.Users[i] {
			return false
		}
	}
	return true
}

func TestTooLarge(t *testing.T) {
	b := newBudget(t, 100, time.Second)
	u := b.User("resp")
	_, err := u.Acquire(t.Context(), 101)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "limits.max_inflight_bytes") {
		t.Fatalf("Acquire(101) = %v, want ErrTooLarge naming the limit", err)
	}
	if st := u.Stats(); st.Rejections != 1 || st.Waits != 0 {
		t.Fatalf("stats = %+v, want one rejection and no wait", st)
	}
}

// TestExhausted: a request that finds no room waits the budget's Wait and
// then fails, naming the limit; the bytes held are untouched.
func TestExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, 100, 2*time.Second)
		u := b.User("resp")
		hold, err := u.Acquire(t.Context(), 80)
		if err != nil {
			t.Fatal(err)
		}
		defer hold()
		start := time.Now()
		_, err = u.Acquire(t.Context(), 30)
		if !errors.Is(err, ErrExhausted) {
			t.Fatalf("Acquire = %v, want ErrExhausted", err)
		}
		if !strings.Contains(err.Error(), "limits.max_inflight_bytes") {
			t.Fatalf("error %q does not name the limit", err)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Fatalf("waited %v, want the budget's wait of 2s", waited)
		}
		if st := u.Stats(); st.Waits != 1 || st.Rejections != 1 || st.InUse != 80 {
			t.Fatalf("stats = %+v, want 1 wait, 1 rejection, 80 in use", st)
		}
	})
}

// TestWaiterAdmitted: bytes released during the wait go to the waiter.
func TestWaiterAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, 100, 5*time.Second)
		u := b.User("http")
		hold, err := u.Acquire(t.Context(), 100)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(time.Second)
			hold()
		}()
		r, err := u.Acquire(t.Context(), 50)
		if err != nil {
			t.Fatalf("Acquire after a release = %v", err)
		}
		r()
		if st := u.Stats(); st.Waits != 1 || st.Rejections != 0 || st.Admitted != 2 {
			t.Fatalf("stats = %+v, want 1 wait, no rejection, 2 admitted", st)
		}
	})
}

// TestContextEnds: a caller whose context ends while waiting gets the
// context's error, not ErrExhausted.
func TestContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, 10, time.Minute)
		u := b.User("cluster")
		hold, _ := u.Acquire(t.Context(), 10)
		defer hold()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := u.Acquire(ctx, 5)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrExhausted) {
			t.Fatalf("Acquire = %v, want the context's deadline", err)
		}
	})
}

// TestConcurrentNeverExceeds: many users taking and giving back never hold
// more than the capacity together, and everything comes back.
func TestConcurrentNeverExceeds(t *testing.T) {
	const capacity = 1000
	b := newBudget(t, capacity, time.Minute)
	var held, peak atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		u := b.User([]string{"http", "resp", "cluster"}[g%3])
		wg.Go(func() {
			for i := range 200 {
				n := int64(1 + (g*37+i*11)%400)
				r, err := u.Acquire(t.Context(), n)
				if err != nil {
					t.Error(err)
					return
				}
				now := held.Add(n)
				for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
				}
				held.Add(-n)
				r()
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > capacity {
		t.Fatalf("%d bytes held at once, capacity %d", p, capacity)
	}
	if b.InUse() != 0 {
		t.Fatalf("InUse = %d after every release", b.InUse())
	}
	var admitted int64
	for _, us := range b.Stats().Users {
		admitted += us.Admitted
		if us.InUse != 0 {
			t.Fatalf("%s holds %d bytes after every release", us.Name, us.InUse)
		}
	}
	if admitted != 16*200 {
		t.Fatalf("admitted %d, want %d", admitted, 16*200)
	}
}
