package budget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Options configures a Budget.
type Options struct {
	// Capacity is the bytes the budget hands out at once. Required,
	// positive.
	Capacity int64
	// Wait bounds how long Acquire waits for room before it gives up with
	// ErrExhausted. Default 1s.
	Wait time.Duration
	// Name is the setting the capacity comes from, named in errors so that
	// a client told no knows which limit refused it. Default "budget".
	Name string
}

// EnsureDefaults fills in zero fields.
func (o *Options) EnsureDefaults() {
	if o.Wait == 0 {
		o.Wait = time.Second
	}
	if o.Name == "" {
		o.Name = "budget"
	}
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	var errs []error
	if o.Capacity <= 0 {
		errs = append(errs, fmt.Errorf("budget: Capacity %d must be positive", o.Capacity))
	}
	if o.Wait < 0 {
		errs = append(errs, fmt.Errorf("budget: Wait %v must not be negative", o.Wait))
	}
	return errors.Join(errs...)
}

// Budget is a pool of bytes shared by the front ends of a node. It is safe
// for concurrent use. Waiters are served in order: a large request waiting
// for room is not passed by smaller ones behind it, so it cannot starve.
type Budget struct {
	opts  Options
	sem   *semaphore.Weighted
	inUse atomic.Int64

	mu struct {
		sync.Mutex
		users []*User // in creation order, for stable stats
	}
}

// New returns an empty budget.
func New(opts Options) (*Budget, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Budget{opts: opts, sem: semaphore.NewWeighted(opts.Capacity)}, nil
}

// Capacity returns the budget's size in bytes.
func (b *Budget) Capacity() int64 { return b.opts.Capacity }

// InUse returns the bytes held now, by every user.
func (b *Budget) InUse() int64 { return b.inUse.Load() }

// User returns the handle through which the front end name takes bytes;
// the same name gives the same User.
func (b *Budget) User(name string) *User {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, u := range b.mu.users {
		if u.name == name {
			return u
		}
	}
	u := &User{b: b, name: name}
	b.mu.users = append(b.mu.users, u)
	return u
}

// Stats is a snapshot of a budget.
type Stats struct {
	Capacity int64 // bytes
	InUse    int64 // bytes held now
	Users    []UserStats
}

// UserStats are one front end's counters.
type UserStats struct {
	Name string
	// InUse is the bytes the front end holds now.
	InUse int64
	// Admitted counts acquisitions that got their bytes.
	Admitted int64
	// Waits counts acquisitions that found no room at first and waited.
	Waits int64
	// Rejections counts acquisitions refused: the wait ran out, the bytes
	// exceeded the whole budget, or a TryAcquire found no room.
	Rejections int64
}

// Stats returns the budget's counters, users in the order they were made.
func (b *Budget) Stats() Stats {
	b.mu.Lock()
	users := append([]*User(nil), b.mu.users...)
	b.mu.Unlock()
	s := Stats{Capacity: b.opts.Capacity, InUse: b.inUse.Load()}
	for _, u := range users {
		s.Users = append(s.Users, u.Stats())
	}
	return s
}

// User takes bytes from a Budget on behalf of one front end and counts
// what happened. It is safe for concurrent use.
type User struct {
	b    *Budget
	name string

	inUse, admitted, waits, rejections atomic.Int64
}

// Name returns the front end's name.
func (u *User) Name() string { return u.name }

// Budget returns the budget u draws on.
func (u *User) Budget() *Budget { return u.b }

// Stats returns u's counters.
func (u *User) Stats() UserStats {
	return UserStats{Name: u.name, InUse: u.inUse.Load(), Admitted: u.admitted.Load(), Waits: u.waits.Load(), Rejections: u.rejections.Load()}
}

// Acquire takes n bytes, waiting at most the budget's Wait for them, and
// returns the function that gives them back; calling it more than once
// gives them back once. n <= 0 takes nothing. It fails with ErrTooLarge
// when n exceeds the capacity, ErrExhausted when the wait runs out, and
// ctx's error when ctx ends first.
func (u *User) Acquire(ctx context.Context, n int64) (func(), error) {
	if n <= 0 {
		return func() {}, nil
	}
	b := u.b
	if n > b.opts.Capacity {
		u.rejections.Add(1)
		return nil, fmt.Errorf("%w: %d bytes, %s is %d", ErrTooLarge, n, b.opts.Name, b.opts.Capacity)
	}
	if !b.sem.TryAcquire(n) {
		u.waits.Add(1)
		wctx, cancel := context.WithTimeout(ctx, b.opts.Wait)
		err := b.sem.Acquire(wctx, n)
		cancel()
		if err != nil {
			u.rejections.Add(1)
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			return nil, fmt.Errorf("%w: %s (%d bytes) had no room for %d more bytes within %v (%d in use); retry later",
				ErrExhausted, b.opts.Name, b.opts.Capacity, n, b.opts.Wait, b.inUse.Load())
		}
	}
	return u.took(n), nil
}

// TryAcquire takes n bytes if they are free now, without waiting: for a
// caller that already holds bytes and must not wait on itself.
func (u *User) TryAcquire(n int64) (func(), bool) {
	if n <= 0 {
		return func() {}, true
	}
	if n > u.b.opts.Capacity || !u.b.sem.TryAcquire(n) {
		u.rejections.Add(1)
		return nil, false
	}
	return u.took(n), true
}

func (u *User) took(n int64) func() {
	u.admitted.Add(1)
	u.inUse.Add(n)
	u.b.inUse.Add(n)
	var done atomic.Bool
	return func() {
		if done.Swap(true) {
			return
		}
		u.inUse.Add(-n)
		u.b.inUse.Add(-n)
		u.b.sem.Release(n)
	}
}
