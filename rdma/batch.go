package rdma

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// State is where a request (or a whole batch) stands.
type State uint8

// States. A request starts Pending and ends in exactly one of the others.
const (
	Pending State = iota
	Completed
	Failed
	Timeout
)

func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Completed:
		return "completed"
	case Failed:
		return "failed"
	case Timeout:
		return "timeout"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Request asks for Length bytes to move between a local segment and a
// remote one. Read copies remote into local; Write copies local into remote.
type Request struct {
	Op           Op
	Local        *Segment
	LocalOffset  uint64
	Remote       *RemoteSegment
	RemoteOffset uint64
	Length       uint64
}

// Status reports a request, or a whole batch.
type Status struct {
	State State
	// Transferred counts the bytes moved so far; for a batch, the sum.
	Transferred uint64
	// Err says why a request failed or timed out; for a batch, the first
	// such error in submission order.
	Err error
	// Elapsed is the time from submission to completion (for a batch, the
	// longest request); zero while pending.
	Elapsed time.Duration
}

// Batch groups up to a fixed number of requests, submitted together or in
// steps, and reports on them. Request i of a batch is the i-th submitted.
// A Batch is safe for concurrent use.
type Batch struct {
	e        *Engine
	capacity int
	mu       struct {
		sync.Mutex
		reqs    []*request
		pending int
		freed   bool
		// idle is closed when pending drops to zero.
		idle chan struct{}
	}
}

type request struct {
	b        *Batch
	task     Task
	local    *Segment
	remote   *RemoteSegment
	ctx      context.Context
	deadline time.Time
	start    time.Time
	// Guarded by b.mu.
	state   State
	err     error
	elapsed time.Duration
}

// Cap returns the batch's capacity.
func (b *Batch) Cap() int { return b.capacity }

// Len returns how many requests were submitted.
func (b *Batch) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.mu.reqs)
}

// Submit validates every request and starts them; it returns the index of
// the first. If any request is invalid (a range outside its segment on
// either side, a zero length, an unknown op, a segment not of this engine)
// nothing is submitted and the error names the request.
//
// The requests run until done, until ctx is done, or until
// Options.RequestTimeout passes. Submit blocks, honouring ctx, while the
// engine's queue is full; requests it could not queue before ctx ended are
// marked failed.
func (b *Batch) Submit(ctx context.Context, reqs ...Request) (int, error) {
	e := b.e
	if !e.beginSubmit() {
		return 0, ErrClosed
	}
	defer e.submits.Done()
	if len(reqs) == 0 {
		return 0, fmt.Errorf("%w: no requests", ErrInvalidRequest)
	}
	now := time.Now()
	deadline := now.Add(e.opts.RequestTimeout)
	rs := make([]*request, 0, len(reqs))
	fail := func(err error) (int, error) {
		for _, r := range rs {
			r.unpin()
		}
		return 0, err
	}
	for i, q := range reqs {
		r, err := e.newRequest(b, q)
		if err != nil {
			return fail(fmt.Errorf("request %d: %w", i, err))
		}
		r.ctx, r.deadline, r.start = ctx, deadline, now
		rs = append(rs, r)
	}

	b.mu.Lock()
	switch {
	case b.mu.freed:
		b.mu.Unlock()
		return fail(fmt.Errorf("%w: batch freed", ErrClosed))
	case len(b.mu.reqs)+len(rs) > b.capacity:
		n := len(b.mu.reqs)
		b.mu.Unlock()
		return fail(fmt.Errorf("%w: %d submitted + %d new > capacity %d", ErrBatchFull, n, len(rs), b.capacity))
	}
	first := len(b.mu.reqs)
	b.mu.reqs = append(b.mu.reqs, rs...)
	if b.mu.pending == 0 {
		b.mu.idle = make(chan struct{})
	}
	b.mu.pending += len(rs)
	b.mu.Unlock()

	for i, r := range rs {
		select {
		case e.queue <- r:
			continue
		case <-ctx.Done():
			err := fmt.Errorf("rdma: submit: %w", ctx.Err())
			for _, r := range rs[i:] {
				r.finish(err)
			}
			return first, err
		case <-e.ctx.Done():
			for _, r := range rs[i:] {
				r.finish(ErrClosed)
			}
			return first, ErrClosed
		}
	}
	return first, nil
}

// Status reports request i (in submission order).
func (b *Batch) Status(i int) (Status, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i < 0 || i >= len(b.mu.reqs) {
		return Status{}, fmt.Errorf("%w: request %d of %d", ErrInvalidRequest, i, len(b.mu.reqs))
	}
	r := b.mu.reqs[i]
	return Status{State: r.state, Transferred: r.task.Transferred(), Err: r.err, Elapsed: r.elapsed}, nil
}

// BatchStatus sums up the batch: Pending while any request is; then Failed
// if any failed, Timeout if any timed out, Completed otherwise.
func (b *Batch) BatchStatus() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.statusLocked()
}

func (b *Batch) statusLocked() Status {
	var st Status
	var failed, timedOut bool
	for _, r := range b.mu.reqs {
		st.Transferred += r.task.Transferred()
		st.Elapsed = max(st.Elapsed, r.elapsed)
		switch r.state {
		case Failed:
			failed = true
		case Timeout:
			timedOut = true
		}
		if st.Err == nil && r.err != nil {
			st.Err = r.err
		}
	}
	switch {
	case b.mu.pending > 0:
		st.State = Pending
	case failed:
		st.State = Failed
	case timedOut:
		st.State = Timeout
	default:
		st.State = Completed
	}
	return st
}

// Wait blocks until no request of the batch is pending, or ctx is done, and
// returns the batch status. When Wait returns without error, no transport
// touches the local memory of the batch's requests any more.
func (b *Batch) Wait(ctx context.Context) (Status, error) {
	for {
		b.mu.Lock()
		if b.mu.pending == 0 {
			st := b.statusLocked()
			b.mu.Unlock()
			return st, nil
		}
		idle := b.mu.idle
		b.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return b.BatchStatus(), fmt.Errorf("rdma: wait: %w", ctx.Err())
		}
	}
}

// Free releases the batch. It is refused with ErrBusy while requests are
// pending; afterwards the batch accepts no more submissions.
func (b *Batch) Free() error {
	b.mu.Lock()
	if b.mu.freed {
		b.mu.Unlock()
		return nil
	}
	if b.mu.pending > 0 {
		n := b.mu.pending
		b.mu.Unlock()
		return fmt.Errorf("%w: batch has %d pending requests", ErrBusy, n)
	}
	b.mu.freed = true
	b.mu.Unlock()
	b.e.freeBatch()
	return nil
}

// finish records the request's outcome and drops its pins. Only after this
// may the caller's memory be reused, so it runs after the transport returns.
func (r *request) finish(err error) {
	state := Completed
	switch {
	case err == nil:
	case isDeadline(err):
		state = Timeout
		err = fmt.Errorf("%w after %v: %w", ErrTimeout, time.Since(r.start).Round(time.Millisecond), err)
	default:
		state = Failed
	}
	r.unpin()
	b := r.b
	b.mu.Lock()
	r.state, r.err, r.elapsed = state, err, time.Since(r.start)
	b.mu.pending--
	if b.mu.pending == 0 {
		close(b.mu.idle)
	}
	b.mu.Unlock()
}

func (r *request) unpin() {
	r.local.pins.release()
	r.remote.pins.release()
}
