package rdma

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestBatchStatusAggregates checks the batch state rules on requests
// finished by hand, without a transport.
func TestBatchStatusAggregates(t *testing.T) {
	deadline := fmt.Errorf("x: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		name    string
		results []error
		want    State
	}{
		{"all done", []error{nil, nil}, Completed},
		{"one failed", []error{nil, errors.New("boom")}, Failed},
		{"one timed out", []error{deadline, nil}, Timeout},
		{"failed beats timeout", []error{deadline, errors.New("boom")}, Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Batch{capacity: len(tc.results)}
			b.mu.idle = make(chan struct{})
			b.mu.pending = len(tc.results)
			var rs []*request
			for range tc.results {
				r := &request{b: b, local: &Segment{}, remote: &RemoteSegment{}, start: time.Now()}
				r.local.pins.acquire()
				r.remote.pins.acquire()
				rs = append(rs, r)
			}
			b.mu.reqs = rs
			for i, err := range tc.results[:len(tc.results)-1] {
				rs[i].finish(err)
			}
			if st := b.BatchStatus(); st.State != Pending {
				t.Fatalf("with one request left: %v", st.State)
			}
			rs[len(rs)-1].finish(tc.results[len(rs)-1])
			st, err := b.Wait(t.Context())
			if err != nil || st.State != tc.want {
				t.Fatalf("Wait = %v %v, want %v", st.State, err, tc.want)
			}
			if tc.want == Timeout && !errors.Is(st.Err, ErrTimeout) {
				t.Errorf("timeout error %v does not wrap ErrTimeout", st.Err)
			}
		})
	}
}

func TestStateAndOpStrings(t *testing.T) {
	for v, want := range map[fmt.Stringer]string{Pending: "pending", Completed: "completed", Failed: "failed", Timeout: "timeout", State(9): "state(9)", Read: "read", Write: "write", Op(7): "op(7)"} {
		if v.String() != want {
			t.Errorf("%v != %s", v, want)
		}
	}
}
