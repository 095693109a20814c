package server

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yuebing/yuebing/tier"
)

// tierHealth returns the health of the store's tiers that report one
// (tier.HealthReporter), by name.
func (a *API) tierHealth() map[string]tier.Health {
	out := map[string]tier.Health{}
	for _, t := range a.store.Tiers() {
		if hr, ok := t.(tier.HealthReporter); ok {
			out[t.Name()] = hr.Health()
		}
	}
	return out
}

// healthBody is /healthz's and /readyz's answer.
type healthBody struct {
	Status string                `json:"status"`
	Tiers  map[string]tierStatus `json:"tiers,omitempty"`
}

type tierStatus struct {
	Status string    `json:"status"` // "ok" or "degraded"
	Cause  string    `json:"cause,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

// health builds the body: status is ok (or ready) unless a tier is
// degraded. A degraded SSD tier does not make the node unready: it still
// serves from DRAM and verified reads from SSD, and taking it out of a
// load balancer would turn a slower node into a missing one
// (docs/durability.md, "Faults").
func (a *API) health(ok string) healthBody {
	b := healthBody{Status: ok, Tiers: map[string]tierStatus{}}
	for name, h := range a.tierHealth() {
		ts := tierStatus{Status: "ok"}
		if h.Degraded {
			ts = tierStatus{Status: "degraded", Cause: h.Cause, Reason: h.Reason, Since: h.Since}
			b.Status = "degraded"
		}
		b.Tiers[name] = ts
	}
	return b
}

func (a *API) healthz(c *gin.Context) { c.JSON(http.StatusOK, a.health("ok")) }

var (
	descDegraded = prometheus.NewDesc("yuebing_tier_degraded",
		"1 while the tier's device is failing: it refuses writes and serves verified reads.", tierLabels, nil)
	descDegradedCause = prometheus.NewDesc("yuebing_tier_degraded_cause",
		"1 for the cause of a degraded tier (read, write, sync, create, no_space, index); absent while healthy.",
		[]string{"tier", "cause"}, nil)
	descIOErrors = prometheus.NewDesc("yuebing_tier_io_errors_total",
		"Failed device operations, by operation (read, write, sync, create, index).", []string{"tier", "op"}, nil)
	descRecoveries = prometheus.NewDesc("yuebing_tier_recoveries_total",
		"Times the tier left the degraded state by itself.", tierLabels, nil)
)

var healthDescs = []*prometheus.Desc{descDegraded, descDegradedCause, descIOErrors, descRecoveries}

// collectHealth exports the tiers' health.
func (a *API) collectHealth(ch chan<- prometheus.Metric) {
	for name, h := range a.tierHealth() {
		degraded := 0.0
		if h.Degraded {
			degraded = 1
			ch <- prometheus.MustNewConstMetric(descDegradedCause, prometheus.GaugeValue, 1, name, h.Cause)
		}
		ch <- prometheus.MustNewConstMetric(descDegraded, prometheus.GaugeValue, degraded, name)
		for op, n := range h.IOErrors {
			ch <- prometheus.MustNewConstMetric(descIOErrors, prometheus.CounterValue, float64(n), name, op)
		}
		ch <- prometheus.MustNewConstMetric(descRecoveries, prometheus.CounterValue, float64(h.Recoveries), name)
	}
}
