package console

import (
	"context"
	"sync"
	"time"
)

// Sample is the node's counters at one moment: the overview derives its
// hit rate and request rate from the differences between samples.
type Sample struct {
	Time time.Time `json:"time"`
	// Hits and Misses count reads of the store, by every front end.
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
	// Requests counts HTTP requests served.
	Requests int64 `json:"requests"`
	// Evictions, Demotions and Promotions are summed over the tiers.
	Evictions  int64 `json:"evictions"`
	Demotions  int64 `json:"demotions"`
	Promotions int64 `json:"promotions"`
	// Blocks is how many distinct blocks the store holds.
	Blocks int64 `json:"blocks"`
	// FrontEnds are the requests of each front end the node runs, by
	// name: http, redis, shm, transfer.
	FrontEnds map[string]FrontEnd `json:"front_ends,omitempty"`
	// Tiers are the tiers' fill, fastest first.
	Tiers []TierFill `json:"tiers,omitempty"`
}

// HistoryOptions configures a History.
type HistoryOptions struct {
	// Interval between samples. Default 5s.
	Interval time.Duration
	// Len is how many samples are kept. Default 120 (ten minutes at the
	// default interval: "the last minutes" of the overview).
	Len int
	// Sample reads the counters. Required.
	Sample func() Sample
}

// History keeps the last Len samples in a ring. It is safe for concurrent
// use; Run takes the samples until its context ends.
type History struct {
	opts HistoryOptions
	mu   struct {
		sync.Mutex
		ring []Sample
		next int // where the next sample goes once the ring is full
	}
}

// NewHistory returns an empty history.
func NewHistory(opts HistoryOptions) *History {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.Len <= 0 {
		opts.Len = 120
	}
	if opts.Sample == nil {
		panic("BUG: console: HistoryOptions.Sample is required")
	}
	return &History{opts: opts}
}

// Interval returns the time between samples.
func (h *History) Interval() time.Duration { return h.opts.Interval }

// Run samples every Interval until ctx ends. It takes the first sample at
// once unless the history holds one already: a caller that serves Samples
// before Run's goroutine is scheduled adds the first itself, so the
// history never starts empty.
func (h *History) Run(ctx context.Context) {
	h.mu.Lock()
	empty := len(h.mu.ring) == 0
	h.mu.Unlock()
	if empty {
		h.Add(h.opts.Sample())
	}
	t := time.NewTicker(h.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.Add(h.opts.Sample())
	}
}

// Add records a sample, dropping the oldest when the ring is full.
func (h *History) Add(s Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.mu.ring) < h.opts.Len {
		h.mu.ring = append(h.mu.ring, s)
		return
	}
	h.mu.ring[h.mu.next] = s
	h.mu.next = (h.mu.next + 1) % h.opts.Len
}

// Samples returns the kept samples, oldest first, and the live one last,
// each front end's latency quantiles set for the interval that ends at
// the sample. The caller owns the returned slice.
func (h *History) Samples() []Sample {
	h.mu.Lock()
	out := make([]Sample, 0, len(h.mu.ring)+1)
	out = append(out, h.mu.ring[h.mu.next:]...)
	out = append(out, h.mu.ring[:h.mu.next]...)
	h.mu.Unlock()
	out = append(out, h.opts.Sample())
	intervals(out)
	return out
}
