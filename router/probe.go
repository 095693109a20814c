package router

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/yuebing/yuebing/scheduler"
)

// Metrics the probe reads from an engine's Prometheus text: vLLM's queue
// gauges, and the simulator's own estimate of its queued prefill work when
// it exports one.
const (
	metricWaiting    = "vllm:num_requests_waiting"
	metricRunning    = "vllm:num_requests_running"
	metricQueueSecs  = "yuebing_engine_queue_seconds"
	maxMetricsBytes  = 4 << 20
	probeTimeoutFrac = 2 // a probe may take half the interval
)

// maxProbeTimeout caps one probe's wait whatever the interval: a failed
// request waits for the probe it triggers before its retry.
const maxProbeTimeout = 5 * time.Second

// probeLoop probes an engine every ProbeInterval until ctx ends.
func (r *Router) probeLoop(ctx context.Context, e *engine) {
	t := time.NewTicker(r.opts.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.probe(ctx, e)
	}
}

// probe reads an engine's /metrics once and decides its health: an answer
// brings a downed engine back and corrects its queue estimate; no answer
// ProbeFailures times in a row, or a refused connection, takes it out.
// The probe is the only judge of an engine's health: a request that an
// engine failed triggers one (see failed) rather than taking it out, since
// a request's failure can be the request's (one poison prompt retried
// around would take every engine out). Calls for one engine at once share
// one probe; each returns when it is decided, or ctx ends.
func (r *Router) probe(ctx context.Context, e *engine) time.Time {
	ch := r.probes.DoChan(e.ID, func() (any, error) {
		start := time.Now()
		// The first caller's context bounds the shared probe; a decision
		// made after it ended is not made.
		pctx, cancel := context.WithTimeout(ctx, min(r.opts.ProbeInterval/probeTimeoutFrac, maxProbeTimeout))
		vals, err := r.scrape(pctx, e.URL+"/metrics")
		cancel()
		if ctx.Err() != nil {
			return start, nil
		}
		if err != nil {
			failed := e.probeFailed.Add(1)
			if int(failed) >= r.opts.ProbeFailures || errors.Is(err, syscall.ECONNREFUSED) {
				r.markDown(e.ID, fmt.Errorf("probe (%d in a row unanswered): %w", failed, err))
			} else {
				r.m.probeMisses.WithLabelValues(e.ID).Inc()
			}
			return start, nil
		}
		e.probeFailed.Store(0)
		r.markUp(e.ID)
		if l, ok := r.loadFrom(vals); ok && e.role != scheduler.RoleDecode {
			_ = r.d.Heartbeat(e.ID, l)
		}
		return start, nil
	})
	select {
	case res := <-ch:
		t, _ := res.Val.(time.Time)
		return t
	case <-ctx.Done():
		return time.Time{}
	}
}

// probeSince has e probed by a probe that started at t or later: one
// already under way when a request failed may have read the engine just
// before it died (an answer, or a cut connection that counts only as a
// miss), and would leave a dead engine in for the retry.
func (r *Router) probeSince(ctx context.Context, e *engine, t time.Time) {
	for range 2 {
		if started := r.probe(ctx, e); !started.Before(t) || ctx.Err() != nil {
			return
		}
	}
}

// loadFrom turns scraped gauges into a queue time.
func (r *Router) loadFrom(vals map[string]float64) (scheduler.Load, bool) {
	if q, ok := vals[metricQueueSecs]; ok && q >= 0 {
		return scheduler.Load{QueueTime: time.Duration(q * float64(time.Second))}, true
	}
	w, ok := vals[metricWaiting]
	if !ok || w < 0 {
		return scheduler.Load{}, false
	}
	return scheduler.Load{QueueTime: time.Duration(w * float64(r.prefillMean.Load()))}, true
}

// scrape reads the named gauges of a Prometheus text page, summed over
// their label sets.
func (r *Router) scrape(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.probeClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	return parseMetrics(io.LimitReader(resp.Body, maxMetricsBytes))
}

func parseMetrics(rd io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		if name != metricWaiting && name != metricRunning && name != metricQueueSecs {
			continue
		}
		rest := line[len(name):]
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndexByte(rest, '}')
			if j < 0 {
				continue
			}
			rest = rest[j+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out, sc.Err()
}
