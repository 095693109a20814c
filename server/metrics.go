package server

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/yuebing/yuebing/server/console"
)

// metrics are the API's Prometheus metrics. Request metrics are labelled by
// route template (c.FullPath()), never by raw path: a label per key would
// grow without bound. Store metrics are read from Hierarchy.Stats when
// scraped, so nothing polls.
type metrics struct {
	duration *prometheus.HistogramVec
	bytesIn  *prometheus.CounterVec
	bytesOut *prometheus.CounterVec
	inflight prometheus.Gauge
	handler  gin.HandlerFunc
	// requests counts requests served, for the console's request rate
	// (the histogram holds the same count, spread over its labels).
	requests atomic.Int64
	// latency times the same requests for the console's p50 and p99.
	latency console.Meter
}

// latencyBuckets span a cached 4 KiB hit on loopback (tens of µs) to a
// 256 MiB block over a slow link (tens of seconds).
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

func newMetrics(reg *prometheus.Registry, a *API) (*metrics, error) {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "yuebing_http_request_duration_seconds", Help: "HTTP request latency by route template, method and status code.",
			Buckets: latencyBuckets,
		}, []string{"route", "method", "code"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yuebing_http_request_bytes_total", Help: "Request body bytes by route template (as declared by Content-Length).",
		}, []string{"route"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yuebing_http_response_bytes_total", Help: "Response body bytes by route template.",
		}, []string{"route"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "yuebing_http_requests_in_flight", Help: "HTTP requests being served.",
		}),
	}
	for _, c := range []prometheus.Collector{
		m.duration, m.bytesIn, m.bytesOut, m.inflight, &storeCollector{a: a}, budgetCollector{a.budget.Budget()},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	m.handler = func(c *gin.Context) { h.ServeHTTP(c.Writer, c.Request) }
	return m, nil
}

func (m *metrics) middleware(c *gin.Context) {
	start := time.Now()
	m.inflight.Inc()
	c.Next()
	m.inflight.Dec()
	m.requests.Add(1)
	took := time.Since(start)
	m.latency.Observe(took)
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	m.duration.WithLabelValues(route, c.Request.Method, strconv.Itoa(c.Writer.Status())).Observe(took.Seconds())
	if n := c.Request.ContentLength; n > 0 {
		m.bytesIn.WithLabelValues(route).Add(float64(n))
	}
	n := int64(max(c.Writer.Size(), 0))
	if v, ok := c.Get(ctxRelayedBytes); ok {
		n += v.(int64)
	}
	if n > 0 {
		m.bytesOut.WithLabelValues(route).Add(float64(n))
	}
}

// storeCollector exports the store's and the API's counters at scrape time.
type storeCollector struct{ a *API }

var (
	tierLabels  = []string{"tier"}
	descHits    = prometheus.NewDesc("yuebing_tier_hits_total", "Reads served by the tier.", tierLabels, nil)
	descMisses  = prometheus.NewDesc("yuebing_tier_misses_total", "Reads the tier could not serve.", tierLabels, nil)
	descCap     = prometheus.NewDesc("yuebing_tier_capacity_bytes", "Configured capacity of the tier.", tierLabels, nil)
	descUsed    = prometheus.NewDesc("yuebing_tier_used_bytes", "Bytes allocated in the tier.", tierLabels, nil)
	descBlocks  = prometheus.NewDesc("yuebing_tier_blocks", "Blocks stored in the tier.", tierLabels, nil)
	descPinned  = prometheus.NewDesc("yuebing_tier_pinned_bytes", "Bytes of soft-pinned blocks in the tier.", tierLabels, nil)
	descPuts    = prometheus.NewDesc("yuebing_tier_puts_total", "Blocks written to the tier.", tierLabels, nil)
	descDeletes = prometheus.NewDesc("yuebing_tier_deletes_total", "Blocks deleted from the tier.", tierLabels, nil)
	descEvict   = prometheus.NewDesc("yuebing_tier_evictions_total", "Blocks evicted from the tier.", tierLabels, nil)
	descCorrupt = prometheus.NewDesc("yuebing_tier_corrupt_total", "Blocks dropped because they failed verification.", tierLabels, nil)
	descDemote  = prometheus.NewDesc("yuebing_tier_demotions_total", "Blocks moved from the tier to the next one down.", tierLabels, nil)
	descPromote = prometheus.NewDesc("yuebing_tier_promotions_total", "Blocks copied up into the tier.", tierLabels, nil)

	descStoreBlocks = prometheus.NewDesc("yuebing_store_blocks", "Distinct blocks stored.", nil, nil)
	descStoreHits   = prometheus.NewDesc("yuebing_store_hits_total", "Reads of the store that found the block.", nil, nil)
	descStoreMisses = prometheus.NewDesc("yuebing_store_misses_total", "Reads of the store that did not.", nil, nil)
	descDropped     = prometheus.NewDesc("yuebing_store_dropped_demotions_total", "Evicted blocks dropped because the demotion queue was full.", nil, nil)
	descIndex       = prometheus.NewDesc("yuebing_store_index_bytes", "Memory of the block index.", nil, nil)
	descContexts    = prometheus.NewDesc("yuebing_contexts", "Live contexts.", nil, nil)
)

func (s *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHits, descMisses, descCap, descUsed, descBlocks, descPinned, descPuts, descDeletes,
		descEvict, descCorrupt, descDemote, descPromote, descStoreBlocks, descStoreHits, descStoreMisses, descDropped,
		descIndex, descContexts} {
		ch <- d
	}
	for _, d := range healthDescs {
		ch <- d
	}
}

func (s *storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := s.a.store.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	for _, t := range st.Tiers {
		counter(descHits, t.Hits, t.Name)
		counter(descMisses, t.Misses, t.Name)
		gauge(descCap, t.Capacity, t.Name)
		gauge(descUsed, t.Used, t.Name)
		gauge(descBlocks, t.Blocks, t.Name)
		gauge(descPinned, t.Pinned, t.Name)
		counter(descPuts, t.Puts, t.Name)
		counter(descDeletes, t.Deletes, t.Name)
		counter(descEvict, t.Evictions, t.Name)
		counter(descCorrupt, t.Corrupt, t.Name)
		counter(descDemote, t.Demotions, t.Name)
		counter(descPromote, t.Promotions, t.Name)
	}
	gauge(descStoreBlocks, st.Blocks)
	counter(descStoreHits, st.Hits)
	counter(descStoreMisses, st.Misses)
	counter(descDropped, st.DroppedDemotions)
	gauge(descIndex, st.IndexBytes)
	gauge(descContexts, int64(s.a.contexts.len()))
	s.a.collectHealth(ch)
}
