package router

import (
	"github.com/prometheus/client_golang/prometheus"
)

// ttftBuckets span a cached short prompt on an idle engine (milliseconds)
// to a long prompt behind a queue at the SLO (tens of seconds).
var ttftBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

type metrics struct {
	decisions   *prometheus.CounterVec
	hitTokens   *prometheus.CounterVec
	predicted   prometheus.Histogram
	observed    prometheus.Histogram
	ttftRatio   prometheus.Histogram
	retries     prometheus.Counter
	failures    *prometheus.CounterVec
	engineDown  *prometheus.CounterVec
	probeMisses *prometheus.CounterVec
	specDropped prometheus.Counter
	poolErrors  prometheus.Counter
	prepWaiting prometheus.Gauge
	r           *Router

	// The request path's counters, resolved once: a label lookup costs
	// about as much as the rest of the bookkeeping.
	accepted, noEngine prometheus.Counter
	hitHBM, hitMiss    prometheus.Counter
}

func newMetrics(r *Router) *metrics {
	m := &metrics{
		r: r,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yuebing_router_decisions_total", Help: "Routing decisions by outcome: accepted, rejected_ttft_slo, rejected_tbt_slo, no_engine.",
		}, []string{"outcome"}),
		hitTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yuebing_router_hit_tokens_total", Help: "Prompt tokens of accepted requests by where their KV came from: hbm (the chosen engine's own cache), pulled_hbm, pulled_dram, pulled_ssd, pulled_remote, or miss (computed).",
		}, []string{"source"}),
		predicted: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "yuebing_router_ttft_predicted_seconds", Help: "TTFT Algorithm 1 predicted for accepted requests.", Buckets: ttftBuckets,
		}),
		observed: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "yuebing_router_ttft_observed_seconds", Help: "TTFT observed at the router: to the first streamed chunk.", Buckets: ttftBuckets,
		}),
		ttftRatio: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "yuebing_router_ttft_observed_over_predicted", Help: "Observed over predicted TTFT of streamed requests.",
			Buckets: []float64{.25, .5, .8, .9, 1, 1.1, 1.25, 1.5, 2, 4, 8},
		}),
		prepWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "yuebing_router_prepare_waiting", Help: "Requests waiting for a turn to be read and tokenized (max concurrent prepares).",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yuebing_router_retries_total", Help: "Requests retried on another engine after one failed.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yuebing_router_engine_failures_total", Help: "Requests an engine failed, by engine.",
		}, []string{"engine"}),
		engineDown: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yuebing_router_engine_down_total", Help: "Times an engine was taken out of scheduling after a failure.",
		}, []string{"engine"}),
		probeMisses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yuebing_router_probe_misses_total", Help: "Probes of an engine's /metrics that went unanswered without taking it out (fewer in a row than probe failures).",
		}, []string{"engine"}),
		specDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yuebing_router_speculative_dropped_total", Help: "Speculative entries not recorded because the bound was reached.",
		}),
		poolErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yuebing_router_pool_query_errors_total", Help: "Cluster index queries that failed or timed out; the request was placed without pool hits.",
		}),
	}
	m.accepted = m.decisions.WithLabelValues("accepted")
	m.noEngine = m.decisions.WithLabelValues("no_engine")
	m.hitHBM = m.hitTokens.WithLabelValues("hbm")
	m.hitMiss = m.hitTokens.WithLabelValues("miss")
	return m
}

var (
	descLag = prometheus.NewDesc("yuebing_router_event_lag_seconds",
		"Lag of the latest KV event batch: receive time minus the engine's timestamp.", []string{"engine"}, nil)
	descEvents = prometheus.NewDesc("yuebing_router_events_total",
		"KV events received, by engine and kind (unknown: a kind of a newer engine release, skipped).", []string{"engine", "kind"}, nil)
	descUnkeyed = prometheus.NewDesc("yuebing_router_events_unkeyed_total",
		"Stored blocks the router could not key, by engine and why: orphan (parent never seen), unkeyable (another block size, a LoRA adapter, extra keys, or no tokens per block).", []string{"engine", "why"}, nil)
	descGaps = prometheus.NewDesc("yuebing_router_event_gaps_total",
		"Sequence gaps in engines' KV event streams.", []string{"engine"}, nil)
	descUnrecovered = prometheus.NewDesc("yuebing_router_event_gaps_unrecovered_total",
		"Gaps the replay socket could not fill; the engine's view was reset.", []string{"engine"}, nil)
	descMalformed = prometheus.NewDesc("yuebing_router_events_malformed_total",
		"KV event messages or batches that could not be decoded and were skipped.", []string{"engine"}, nil)
	descRejected = prometheus.NewDesc("yuebing_router_event_peers_rejected_total",
		"ZMQ peers of an engine's KV event sockets dropped for breaking the framing or its limits, or refused past the connections a bound endpoint holds.", []string{"engine"}, nil)
	descOtherSize = prometheus.NewDesc("yuebing_router_events_other_block_size_total",
		"Stored blocks of another size than the router's --block-size, keyed with the engine's size (its events say what its blocks are).", []string{"engine"}, nil)
	descBlockSize = prometheus.NewDesc("yuebing_router_engine_block_size",
		"An engine's KV block size in tokens, as its events state it (the configured one before they do).", []string{"engine"}, nil)
	descRestarts = prometheus.NewDesc("yuebing_router_engine_restarts_total",
		"Engine restarts seen in KV event sequence numbers.", []string{"engine"}, nil)
	descSpec = prometheus.NewDesc("yuebing_router_speculative_entries",
		"Blocks counted as cached on an engine on the router's own decision, not yet confirmed by events (expired ones until the next sweep, at most a TTL later).", nil, nil)
)

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLag, descEvents, descUnkeyed, descGaps, descUnrecovered, descMalformed, descRejected, descRestarts, descSpec, descOtherSize, descBlockSize} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: event figures are read from the
// subscribers' counters when scraped.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, e := range m.r.order {
		if e.sub == nil {
			continue
		}
		s := e.stats
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, s.Lag().Seconds(), e.ID)
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(s.Stored.Load()), e.ID, "stored")
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(s.Removed.Load()), e.ID, "removed")
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(s.Cleared.Load()), e.ID, "cleared")
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(s.UnknownEvents.Load()), e.ID, "unknown")
		ch <- prometheus.MustNewConstMetric(descUnkeyed, prometheus.CounterValue, float64(s.Orphans.Load()), e.ID, "orphan")
		ch <- prometheus.MustNewConstMetric(descUnkeyed, prometheus.CounterValue, float64(s.Unkeyable.Load()), e.ID, "unkeyable")
		ch <- prometheus.MustNewConstMetric(descGaps, prometheus.CounterValue, float64(s.Gaps.Load()), e.ID)
		ch <- prometheus.MustNewConstMetric(descUnrecovered, prometheus.CounterValue, float64(s.Unrecovered.Load()), e.ID)
		ch <- prometheus.MustNewConstMetric(descMalformed, prometheus.CounterValue, float64(s.Malformed.Load()), e.ID)
		ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue, float64(s.Rejected.Load()), e.ID)
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(s.Restarts.Load()), e.ID)
		ch <- prometheus.MustNewConstMetric(descOtherSize, prometheus.CounterValue, float64(s.OtherBlockSize.Load()), e.ID)
		ch <- prometheus.MustNewConstMetric(descBlockSize, prometheus.GaugeValue, float64(e.blockSize.Load()), e.ID)
	}
	ch <- prometheus.MustNewConstMetric(descSpec, prometheus.GaugeValue, float64(m.r.specCount.Load()))
}

// Collectors returns the router's Prometheus collectors, for the server
// to register.
func (r *Router) Collectors() []prometheus.Collector {
	m := r.m
	cs := []prometheus.Collector{m, m.decisions, m.hitTokens, m.predicted, m.observed, m.ttftRatio,
		m.retries, m.failures, m.engineDown, m.probeMisses, m.specDropped, m.poolErrors, m.prepWaiting}
	return append(cs, r.tok.m.collectors()...)
}
