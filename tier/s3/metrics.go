package s3

import "github.com/prometheus/client_golang/prometheus"

// The tier's own series, beside the yuebing_tier_* series every tier has
// (the degraded state among them, from Health).
var (
	descRequests    = prometheus.NewDesc("yuebing_s3_requests_total", "S3 requests by operation and result (ok, error).", []string{"op", "result"}, nil)
	descPending     = prometheus.NewDesc("yuebing_s3_pending_bytes", "Block bytes buffered for upload (open and sealed segments).", nil, nil)
	descObjects     = prometheus.NewDesc("yuebing_s3_objects", "Segment objects in the bucket that the tier knows.", nil, nil)
	descDead        = prometheus.NewDesc("yuebing_s3_dead_bytes", "Bytes of deleted or evicted blocks still in uploaded objects, awaiting compaction.", nil, nil)
	descCompactions = prometheus.NewDesc("yuebing_s3_compactions_total", "Segment objects rewritten or deleted by compaction.", nil, nil)
	descDropped     = prometheus.NewDesc("yuebing_s3_dropped_puts_total", "Puts refused because the bucket was failing and the upload buffer was full.", nil, nil)
	descDegraded    = prometheus.NewDesc("yuebing_s3_degraded", "1 while the bucket is failing.", nil, nil)
)

var _ prometheus.Collector = (*Tier)(nil)

// Describe implements prometheus.Collector.
func (t *Tier) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRequests, descPending, descObjects, descDead, descCompactions, descDropped, descDegraded} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (t *Tier) Collect(ch chan<- prometheus.Metric) {
	for op := range numOps {
		for r, name := range []string{"ok", "error"} {
			ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(t.reqs[op][r].Load()), opNames[op], name)
		}
	}
	t.mu.Lock()
	pending := t.mu.pendingBytes
	var objects, dead int64
	for _, s := range t.mu.segs {
		if s.uploaded {
			objects++
			dead += s.dataLen - s.live
		}
	}
	degraded := 0.0
	if t.mu.health.Degraded {
		degraded = 1
	}
	t.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(pending))
	ch <- prometheus.MustNewConstMetric(descObjects, prometheus.GaugeValue, float64(objects))
	ch <- prometheus.MustNewConstMetric(descDead, prometheus.GaugeValue, float64(dead))
	ch <- prometheus.MustNewConstMetric(descCompactions, prometheus.CounterValue, float64(t.compactions.Load()))
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(t.dropped.Load()))
	ch <- prometheus.MustNewConstMetric(descDegraded, prometheus.GaugeValue, degraded)
}
