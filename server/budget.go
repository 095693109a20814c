package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yuebing/yuebing/server/budget"
)

// The front ends drawing on a node's in-flight budget, as its metrics and
// stats name them.
const (
	budgetHTTP    = "http"
	budgetRESP    = "resp"
	budgetCluster = "cluster"
)

// NewBudget returns the in-flight budget limits describe: MaxInflightBytes
// shared by every front end, each waiting at most QueueTimeout for room.
func NewBudget(l Limits) (*budget.Budget, error) {
	l.ensureDefaults()
	return budget.New(budget.Options{
		Capacity: int64(l.MaxInflightBytes), Wait: l.QueueTimeout, Name: "limits.max_inflight_bytes",
	})
}

// budgetCollector exports the in-flight budget at scrape time.
type budgetCollector struct{ b *budget.Budget }

var (
	descInflight         = prometheus.NewDesc("yuebing_inflight_bytes", "Block bytes held in the heap by requests in flight, every front end together.", nil, nil)
	descInflightCapacity = prometheus.NewDesc("yuebing_inflight_capacity_bytes", "The in-flight budget: limits.max_inflight_bytes.", nil, nil)
	descInflightUser     = prometheus.NewDesc("yuebing_inflight_front_end_bytes", "Block bytes held in the heap by the front end's requests in flight.", []string{"front_end"}, nil)
	descInflightWaits    = prometheus.NewDesc("yuebing_inflight_waits_total", "Requests that found the in-flight budget full and waited for room.", []string{"front_end"}, nil)
	descInflightRejects  = prometheus.NewDesc("yuebing_inflight_rejections_total", "Requests refused because the in-flight budget had no room for them within limits.queue_timeout.", []string{"front_end"}, nil)
)

func (c budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInflight, descInflightCapacity, descInflightUser, descInflightWaits, descInflightRejects} {
		ch <- d
	}
}

func (c budgetCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.Stats()
	ch <- prometheus.MustNewConstMetric(descInflight, prometheus.GaugeValue, float64(st.InUse))
	ch <- prometheus.MustNewConstMetric(descInflightCapacity, prometheus.GaugeValue, float64(st.Capacity))
	for _, u := range st.Users {
		ch <- prometheus.MustNewConstMetric(descInflightUser, prometheus.GaugeValue, float64(u.InUse), u.Name)
		ch <- prometheus.MustNewConstMetric(descInflightWaits, prometheus.CounterValue, float64(u.Waits), u.Name)
		ch <- prometheus.MustNewConstMetric(descInflightRejects, prometheus.CounterValue, float64(u.Rejections), u.Name)
	}
}
