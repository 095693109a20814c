package console

import (
	"sync/atomic"
	"time"
)

// FrontEnd is one front end's requests at one moment: a counter, and
// where the front end times its requests, the latency histogram's
// cumulative counts. History.Samples derives each interval's p50 and p99
// from the difference with the sample before.
type FrontEnd struct {
	// Requests counts requests served since start (HTTP requests, Redis
	// commands, shared-memory requests, blocks moved by the transfer
	// service).
	Requests int64 `json:"requests"`
	// Timed is whether the front end times its requests; only then are
	// P50 and P99 given.
	Timed bool `json:"timed"`
	// P50 and P99 are the latencies of the interval ending at this
	// sample, in seconds; absent for the first sample, an interval with
	// no request, or a front end that is not timed.
	P50 *float64 `json:"p50_seconds,omitempty"`
	P99 *float64 `json:"p99_seconds,omitempty"`
	// Buckets are the latency histogram's cumulative counts, one per
	// Meter bound and the last for every request (+Inf).
	Buckets []int64 `json:"-"`
}

// TierFill is one tier's fill at one moment.
type TierFill struct {
	Name     string `json:"name"`
	Used     int64  `json:"used_bytes"`
	Capacity int64  `json:"capacity_bytes"`
	Blocks   int64  `json:"blocks"`
}

// MeterBounds are the upper bounds of a Meter's buckets, in seconds: a
// loopback hit (tens of µs) to a large block over a slow link.
var MeterBounds = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Meter times a front end's requests: lock-free counts over MeterBounds.
// The zero value is ready to use.
type Meter struct {
	counts [19]atomic.Int64 // len(MeterBounds)+1: the last is over every bound
}

// Observe counts one request that took d.
func (m *Meter) Observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(MeterBounds) && s > MeterBounds[i] {
		i++
	}
	m.counts[i].Add(1)
}

// Read returns the count of requests and the cumulative bucket counts.
func (m *Meter) Read() FrontEnd {
	b := make([]int64, len(m.counts))
	var n int64
	for i := range m.counts {
		n += m.counts[i].Load()
		b[i] = n
	}
	return FrontEnd{Requests: n, Timed: true, Buckets: b}
}

// quantile estimates the q-quantile of the requests counted between two
// cumulative histograms, interpolating within the bucket as Prometheus's
// histogram_quantile does; ok is false when none was counted.
func quantile(prev, cur []int64, q float64) (float64, bool) {
	if len(prev) != len(cur) || len(cur) != len(MeterBounds)+1 {
		return 0, false
	}
	total := cur[len(cur)-1] - prev[len(prev)-1]
	if total <= 0 {
		return 0, false
	}
	rank := q * float64(total)
	var below int64
	for i := range cur {
		n := cur[i] - prev[i]
		if float64(n) >= rank {
			if i == len(MeterBounds) {
				return MeterBounds[len(MeterBounds)-1], true
			}
			lo := 0.0
			if i > 0 {
				lo = MeterBounds[i-1]
			}
			in := n - below
			if in <= 0 {
				return MeterBounds[i], true
			}
			return lo + (MeterBounds[i]-lo)*(rank-float64(below))/float64(in), true
		}
		below = n
	}
	return MeterBounds[len(MeterBounds)-1], true
}

// intervals sets each sample's front ends' P50 and P99 from the sample
// before it.
func intervals(samples []Sample) {
	for i := 1; i < len(samples); i++ {
		prev, cur := samples[i-1].FrontEnds, samples[i].FrontEnds
		if len(cur) == 0 {
			continue
		}
		out := make(map[string]FrontEnd, len(cur))
		for name, fe := range cur {
			if fe.Timed {
				// A front end the sample before lacks (it started since)
				// counted every request it holds in this interval.
				before := make([]int64, len(fe.Buckets))
				if p, ok := prev[name]; ok && p.Timed {
					before = p.Buckets
				}
				if v, ok := quantile(before, fe.Buckets, .5); ok {
					fe.P50 = &v
				}
				if v, ok := quantile(before, fe.Buckets, .99); ok {
					fe.P99 = &v
				}
			}
			out[name] = fe
		}
		samples[i].FrontEnds = out
	}
}
