package router

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// EngineStatus is one engine as the router sees it now.
type EngineStatus struct {
	ID   string `json:"id"`
	URL  string `json:"url"`
	Role string `json:"role"`
	// Healthy is the probes' verdict, Registered the operator's; the
	// router places requests on the engine when both hold (Scheduled).
	Healthy    bool `json:"healthy"`
	Registered bool `json:"registered"`
	Scheduled  bool `json:"scheduled"`
	// State is StateUp, StateDown or StateDraining, since Since.
	State string    `json:"state"`
	Since time.Time `json:"since"`
	// Blocks the router counts the engine as holding.
	Blocks int64 `json:"blocks"`
	// Events is whether the router subscribes to the engine's KV events.
	Events bool `json:"events"`
	// BlockSize is the engine's block size in tokens: its events', or
	// the configured one before they state one.
	BlockSize int `json:"block_size"`
}

// Status is the router's state and counters, for the console.
type Status struct {
	Engines []EngineStatus `json:"engines"`
	// HitTokens are the prompt tokens of accepted requests by where their
	// KV came from (yuebing_router_hit_tokens_total).
	HitTokens map[string]int64 `json:"hit_tokens"`
	// Decisions are the routing decisions by outcome
	// (yuebing_router_decisions_total).
	Decisions map[string]int64 `json:"decisions"`
}

// Status returns the engines, in configuration order, and the counters.
func (r *Router) Status() Status {
	st := Status{HitTokens: counts(r.m.hitTokens), Decisions: counts(r.m.decisions)}
	for _, e := range r.order {
		e.mu.Lock()
		es := EngineStatus{ID: e.ID, URL: e.URL, Role: e.role.String(), Healthy: e.mu.healthy, Registered: e.mu.registered,
			Scheduled: e.scheduledLocked(), Events: e.sub != nil, State: e.stateLocked(), Since: e.mu.since}
		e.mu.Unlock()
		es.Blocks = e.nblocks.Load()
		es.BlockSize = int(e.blockSize.Load())
		st.Engines = append(st.Engines, es)
	}
	return st
}

// counts reads a one-label counter vector.
func counts(v *prometheus.CounterVec) map[string]int64 {
	out := map[string]int64{}
	ch := make(chan prometheus.Metric)
	go func() {
		v.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil || len(pb.GetLabel()) != 1 {
			continue
		}
		out[pb.GetLabel()[0].GetValue()] = int64(pb.GetCounter().GetValue())
	}
	return out
}
