package router

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/yuebing/yuebing/kvevents/kveventstest"
)

// TestRouterProbeToleratesSlowAnswers: a /metrics page slower than the
// probe's timeout now and then leaves the engine in; ProbeFailures in a
// row take it out, and the next answer brings it back.
func TestRouterProbeToleratesSlowAnswers(t *testing.T) {
	const interval = 50 * time.Millisecond
	var hits, slow atomic.Int64 // slow: probes left to stall; -1 stalls all
	stop := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if n := slow.Load(); n != 0 {
			if n > 0 {
				slow.Add(-1)
			}
			select {
			case <-r.Context().Done(): // the probe gave up
			case <-stop:
			}
			return
		}
		fmt.Fprintln(w, `vllm:num_requests_waiting{model_name="m"} 0`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })

	r := startRouter(t, Options{Engines: []Engine{{ID: "a", URL: srv.URL}}, ProbeInterval: interval})
	up := func() bool { _, err := r.d.Instance("a"); return err == nil }

	slow.Store(2) // two stalls in a row: fewer than ProbeFailures (3)
	kveventstest.WaitFor(t, "two stalled probes and an answered one", func() bool { return hits.Load() >= 4 && slow.Load() == 0 })
	kveventstest.WaitFor(t, "a probe after the stalls", func() bool { return hits.Load() >= 5 })
	if got := counter(t, r.m.engineDown.WithLabelValues("a")); got != 0 || !up() {
		t.Fatalf("two slow probes took the engine out (down %v times, up %v)", got, up())
	}
	if got := counter(t, r.m.probeMisses.WithLabelValues("a")); got < 2 {
		t.Fatalf("probe misses counted %v, want 2", got)
	}

	slow.Store(-1)
	kveventstest.WaitFor(t, "the engine taken out after stalls in a row", func() bool { return !up() })
	if got := counter(t, r.m.engineDown.WithLabelValues("a")); got != 1 {
		t.Fatalf("engine down counted %v, want 1", got)
	}
	slow.Store(0)
	kveventstest.WaitFor(t, "the engine back after an answer", up)
}

// TestRouterProbeRefusedTakesOutAtOnce: a closed port is a dead engine, not
// a slow one.
func TestRouterProbeRefusedTakesOutAtOnce(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := startRouter(t, Options{Engines: []Engine{{ID: "a", URL: url}}, ProbeInterval: time.Hour / 1000})
	kveventstest.WaitFor(t, "the refused engine taken out", func() bool { _, err := r.d.Instance("a"); return err != nil })
	if got := counter(t, r.m.probeMisses.WithLabelValues("a")); got != 0 {
		t.Fatalf("a refused connection counted as %v misses before going down", got)
	}
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
