package tcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/yuebing/yuebing/rdma"
)

// Transfer cuts the task into slices and spreads them over the paths to the
// remote segment, round robin over the preferred paths that are up, or the
// secondary ones when no preferred path is. A slice whose path breaks is
// resubmitted on another path; the transfer fails when a slice is refused
// by the peer (a range or segment error), when no path is left, or when ctx
// ends. It returns only once every slice is back, so the caller's memory is
// free again.
func (t *Transport) Transfer(ctx context.Context, task *rdma.Task) error {
	r, ok := task.Remote.(*remote)
	if !ok {
		return fmt.Errorf("%w: remote segment is not a tcp segment", rdma.ErrInvalidRequest)
	}
	if err := rdma.CheckRange(r.desc.Size, task.RemoteOffset, uint64(len(task.Local))); err != nil {
		return err
	}
	x := &transfer{
		t:         t,
		task:      task,
		r:         r,
		sliceSize: uint64(min(t.opts.SliceSize, int(r.desc.MaxSlice))),
		res:       make(chan *slice, t.opts.Window),
		out:       map[*slice]struct{}{},
	}
	rt := t.routesTo(r, task.LocalLocation)
	x.preferred, x.secondary = rt.preferred, rt.secondary
	return x.run(ctx)
}

// retry is a slice to issue again, with the connections its earlier
// attempts went out on (for a Write, to fence them).
type retry struct {
	start  uint64
	fences []uint64
}

type transfer struct {
	t                    *Transport
	task                 *rdma.Task
	r                    *remote
	sliceSize            uint64
	preferred, secondary []rdma.Path
	next                 uint64  // first byte not yet issued
	redo                 []retry // slices to issue again
	res                  chan *slice
	out                  map[*slice]struct{}
}

func (x *transfer) run(ctx context.Context) error {
	var failed error
	stall := time.NewTimer(x.t.opts.IOTimeout)
	defer stall.Stop()
	total := uint64(len(x.task.Local))
	for {
		for failed == nil && len(x.out) < x.t.opts.Window && (len(x.redo) > 0 || x.next < total) {
			if err := x.issue(ctx); err != nil {
				failed = err
			}
		}
		if len(x.out) == 0 {
			return failed
		}
		select {
		case s := <-x.res:
			delete(x.out, s)
			stall.Reset(x.t.opts.IOTimeout)
			err := s.err()
			switch {
			case err == nil:
				x.task.Moved(len(s.buf))
				x.t.stats.slices.Add(1)
				if s.ep.prove() {
					x.t.health.ok(s.ep.path)
				}
			case failed != nil:
			case retryable(err):
				x.t.stats.retries.Add(1)
				r := retry{start: s.start}
				if s.op == rdma.Write && s.ep.connID != 0 {
					r.fences = append(s.fences, s.ep.connID)
				}
				x.redo = append(x.redo, r)
			default:
				failed = err
			}
		case <-ctx.Done():
			if failed == nil {
				failed = ctx.Err()
			}
			for s := range x.out {
				s.ep.cancel(s, ctx.Err())
			}
			// Now only drain; cancellation released or aborted every
			// slice, so the results come promptly.
			for len(x.out) > 0 {
				delete(x.out, <-x.res)
			}
			return failed
		case <-stall.C:
			// Slices wait and nothing answers: treat their connections as
			// broken so the slices move to other paths.
			eps := map[*endpoint]bool{}
			for s := range x.out {
				eps[s.ep] = true
			}
			for ep := range eps {
				ep.fail(fmt.Errorf("tcp: no answer from %s in %v", ep.path.Remote, x.t.opts.IOTimeout), true)
			}
			stall.Reset(x.t.opts.IOTimeout)
		}
	}
}

// issue sends the next slice (a resubmission first) on the next usable path.
func (x *transfer) issue(ctx context.Context) error {
	var start uint64
	var fences []uint64
	if n := len(x.redo); n > 0 {
		start, fences = x.redo[n-1].start, x.redo[n-1].fences
	} else {
		start = x.next
	}
	end := min(start+x.sliceSize, uint64(len(x.task.Local)))
	for {
		path, ok := x.pick()
		if !ok {
			return x.noPath()
		}
		ep, err := x.t.pool.get(ctx, path)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, rdma.ErrClosed) {
				return err
			}
			continue // the pool marked the path down
		}
		s := &slice{
			id:     x.t.nextID.Add(1),
			op:     x.task.Op,
			seg:    x.r.id,
			off:    x.task.RemoteOffset + start,
			buf:    x.task.Local[start:end:end],
			start:  start,
			fences: fences,
			res:    x.res,
		}
		if err := ep.submit(s, ctx.Done()); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue // broken or retired: the pool hands out another
		}
		x.out[s] = struct{}{}
		if n := len(x.redo); n > 0 {
			x.redo = x.redo[:n-1]
		} else {
			x.next = end
		}
		return nil
	}
}

// pick returns the next path that is up, preferred before secondary, round
// robin within each. The cursor is the transport's, not the transfer's:
// otherwise every request of one slice would take the first path.
func (x *transfer) pick() (rdma.Path, bool) {
	now := time.Now()
	for _, paths := range [][]rdma.Path{x.preferred, x.secondary} {
		for range paths {
			p := paths[x.t.rr.Add(1)%uint64(len(paths))]
			if x.t.health.up(p, now) {
				return p, true
			}
		}
	}
	return rdma.Path{}, false
}

func (x *transfer) noPath() error {
	all := append(append([]rdma.Path(nil), x.preferred...), x.secondary...)
	var last error
	for _, p := range all {
		if err := x.t.health.lastErr(p); err != nil {
			last = err
		}
	}
	if last == nil {
		return fmt.Errorf("%w: %d paths to %s, all down", rdma.ErrNoPath, len(all), x.r.peer)
	}
	return fmt.Errorf("%w: %d paths to %s, all down; last error: %w", rdma.ErrNoPath, len(all), x.r.peer, last)
}

// retryable reports errors of the path rather than of the request: those
// move the slice to another path. A peer's refusal (range, segment) would
// be refused on every path.
func retryable(err error) bool {
	switch {
	case errors.Is(err, rdma.ErrOutOfRange), errors.Is(err, rdma.ErrSegmentNotFound),
		errors.Is(err, rdma.ErrAuth), errors.Is(err, rdma.ErrVersion), errors.Is(err, rdma.ErrClosed),
		errors.Is(err, rdma.ErrNotShared):
		return false
	}
	return true
}
