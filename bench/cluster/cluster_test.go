package cluster

import (
	"testing"
	"time"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/bench/benchtest"
)

// TestClusterReplay runs the cluster benchmark small: real nodes, a real
// embedded etcd, the first requests of the conversation trace.
func TestClusterReplay(t *testing.T) {
	tr := benchtest.OpenTestTrace(t, "conversation_trace.jsonl")
	o := Options{Trace: tr, Nodes: 2, DRAMCapacity: 4 << 20, BlockBytes: 4 << 10, Requests: 120,
		Samples: 3, Ranks: []int{1, 10}, HotHits: 4, GetSize: 64 << 10, GetDuration: 200 * time.Millisecond, GetWorkers: 2}
	res, err := Simulate(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 || res.Runs[0].Mode != "local" || res.Runs[1].Mode != "cluster" {
		t.Fatalf("runs %+v", res.Runs)
	}
	for _, run := range res.Runs {
		if run.Requests != 120 || run.Blocks == 0 || len(run.Samples) != 3 {
			t.Fatalf("%s: %d requests, %d blocks, %d samples", run.Mode, run.Requests, run.Blocks, len(run.Samples))
		}
		// Every request of the trace starts with the same block: after the
		// first, it is a hit on one node or another.
		if run.LocalHits+run.RemoteHits < run.Requests-int64(o.Nodes) {
			t.Errorf("%s: %d local and %d remote hits in %d requests", run.Mode, run.LocalHits, run.RemoteHits, run.Requests)
		}
		// The most accessed key is held somewhere at the end.
		if last := run.Samples[len(run.Samples)-1]; last.Mean[0] < 1 {
			t.Errorf("%s: top key has %v replicas", run.Mode, last.Mean[0])
		}
	}
	if res.Runs[0].RemoteHits != 0 {
		t.Errorf("local run read %d blocks from other nodes", res.Runs[0].RemoteHits)
	}
	if res.Local.Blocks == 0 || res.Remote.Blocks == 0 {
		t.Fatalf("GETs: local %+v, remote %+v", res.Local, res.Remote)
	}
	r := Report(res, o)
	names := map[any]int{}
	for _, row := range r.Results {
		names[row["name"]]++
	}
	if names["replay_local"] != 1 || names["replay_cluster"] != 1 || names["cross_node_get"] != 1 || names["cross_node_prefix_get"] != 1 || names["put_cluster"] != 1 || names["replicas_cluster"] != 3 {
		t.Fatalf("rows %v", names)
	}
}

func TestThinSamples(t *testing.T) {
	r := &bench.Report{}
	r.Add(bench.Row{"name": "replay_local"})
	for i := range 5 {
		r.Add(bench.Row{"name": "replicas_local", "t_s": i})
	}
	got := ThinSamples(r, 2)
	if len(got.Results) != 3 || got.Results[1]["t_s"] != 1 || got.Results[2]["t_s"] != 3 {
		t.Fatalf("rows %v", got.Results)
	}
}
