package console

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestHistoryRing(t *testing.T) {
	live := Sample{Blocks: -1}
	h := NewHistory(HistoryOptions{Len: 3, Sample: func() Sample { return live }})
	f := func(want ...int64) {
		t.Helper()
		got := h.Samples()
		if len(got) != len(want)+1 || got[len(got)-1].Blocks != live.Blocks {
			t.Fatalf("%d samples %v, want %v then the live one", len(got), got, want)
		}
		for i, w := range want {
			if got[i].Blocks != w {
				t.Fatalf("sample %d: %d blocks, want %d (all %v)", i, got[i].Blocks, w, got)
			}
		}
	}
	f()
	for i := range int64(5) {
		h.Add(Sample{Blocks: i})
		switch i {
		case 0:
			f(0)
		case 2:
			f(0, 1, 2)
		case 3:
			f(1, 2, 3)
		case 4:
			f(2, 3, 4)
		}
	}
}

// Run samples at once and then every interval, and stops with its context.
func TestHistoryRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n int64
		h := NewHistory(HistoryOptions{Interval: time.Second, Len: 10, Sample: func() Sample {
			n++
			return Sample{Time: time.Now(), Blocks: n}
		}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { h.Run(ctx); close(done) }()
		time.Sleep(3*time.Second + time.Millisecond)
		synctest.Wait()
		cancel()
		<-done
		got := h.Samples()
		// Samples at 0, 1, 2 and 3 s, then the live one.
		if len(got) != 5 || got[3].Time.Sub(got[0].Time) != 3*time.Second {
			t.Fatalf("%d samples: %v", len(got), got)
		}
	})
}

func TestDefaults(t *testing.T) {
	h := NewHistory(HistoryOptions{Sample: func() Sample { return Sample{} }})
	if h.Interval() != 5*time.Second || h.opts.Len != 120 {
		t.Fatalf("defaults: %v, %d", h.Interval(), h.opts.Len)
	}
}

// Each sample's front ends carry the p50 and p99 of the requests timed
// since the sample before; an interval with none has neither.
func TestHistoryLatency(t *testing.T) {
	var m Meter
	live := func() Sample { return Sample{FrontEnds: map[string]FrontEnd{"http": m.Read(), "redis": {Requests: 7}}} }
	h := NewHistory(HistoryOptions{Sample: live})
	h.Add(live())
	for range 98 {
		m.Observe(300 * time.Microsecond) // the (250µs, 500µs] bucket
	}
	m.Observe(2 * time.Second)
	m.Observe(3 * time.Second) // (2.5s, 5s]
	h.Add(live())
	got := h.Samples()
	if len(got) != 3 {
		t.Fatalf("%d samples", len(got))
	}
	if fe := got[0].FrontEnds["http"]; fe.P50 != nil || fe.P99 != nil {
		t.Fatalf("the first sample has latencies %+v", fe)
	}
	fe := got[1].FrontEnds["http"]
	if fe.Requests != 100 || fe.P50 == nil || fe.P99 == nil {
		t.Fatalf("second sample %+v", fe)
	}
	if *fe.P50 <= .00025 || *fe.P50 > .0005 || *fe.P99 <= 1 || *fe.P99 > 2.5 {
		t.Fatalf("p50 %v, p99 %v: want in (250µs, 500µs] and (1s, 2.5s]", *fe.P50, *fe.P99)
	}
	if fe := got[2].FrontEnds["http"]; fe.P50 != nil || fe.Requests != 100 {
		t.Fatalf("an interval with no request: %+v", fe)
	}
	if r := got[1].FrontEnds["redis"]; r.Timed || r.P50 != nil || r.Requests != 7 {
		t.Fatalf("an untimed front end: %+v", r)
	}
}

// Run takes a first sample only into an empty history: a node adds its
// first before it serves, and Run must not add a second at the same time.
func TestHistoryRunFirstSample(t *testing.T) {
	for _, c := range []struct {
		name    string
		added   int
		wantLen int
	}{
		{"empty", 0, 1},
		{"first added by the caller", 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := int64(0)
			h := NewHistory(HistoryOptions{Interval: time.Hour, Sample: func() Sample { n++; return Sample{Blocks: n} }})
			for range c.added {
				h.Add(h.opts.Sample())
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			h.Run(ctx)
			if got := len(h.Samples()) - 1; got != c.wantLen {
				t.Fatalf("%d kept samples, want %d", got, c.wantLen)
			}
		})
	}
}
