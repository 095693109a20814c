package router

import (
	"strings"
	"testing"
	"time"
)

func TestParseMetrics(t *testing.T) {
	page := `# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="1",model_name="m"} 2
vllm:num_requests_running{engine="0",model_name="m"} 7
vllm:num_requests_waiting_other 99
yuebing_engine_queue_seconds 1.5
vllm:num_requests_running{broken 5
`
	got, err := parseMetrics(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if got[metricWaiting] != 5 || got[metricRunning] != 7 || got[metricQueueSecs] != 1.5 || len(got) != 3 {
		t.Fatalf("parsed %v", got)
	}

	r := &Router{}
	r.prefillMean.Store(int64(200 * time.Millisecond))
	f := func(vals map[string]float64, want time.Duration, ok bool) {
		t.Helper()
		l, gotOK := r.loadFrom(vals)
		if gotOK != ok || l.QueueTime != want {
			t.Fatalf("%v: got %v %v, want %v %v", vals, l.QueueTime, gotOK, want, ok)
		}
	}
	f(map[string]float64{metricQueueSecs: 1.5, metricWaiting: 9}, 1500*time.Millisecond, true)
	f(map[string]float64{metricWaiting: 3}, 600*time.Millisecond, true)
	f(map[string]float64{metricWaiting: 0, metricRunning: 4}, 0, true)
	f(map[string]float64{metricRunning: 4}, 0, false)
}
