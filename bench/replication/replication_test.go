package replication

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/bench/benchtest"

	"github.com/yuebing/yuebing/replicate"
)

// hotPrefixTrace: 400 requests, one every 500 ms, each a shared 2-block
// prefix (ids 1, 2) and 3 blocks of its own.
func hotPrefixTrace(t *testing.T) *bench.Trace {
	t.Helper()
	var reqs []bench.Request
	for i := range 400 {
		r := benchtest.Req(1, 2, uint64(1000+3*i), uint64(1001+3*i), uint64(1002+3*i))
		r.Timestamp = time.Duration(i) * 500 * time.Millisecond
		reqs = append(reqs, r)
	}
	return benchtest.MustTrace(t, reqs...)
}

func TestReplicationHotPrefix(t *testing.T) {
	o := Options{
		Traces: []*bench.Trace{hotPrefixTrace(t)},
		Nodes:  4,
		// 100 blocks per node: the unique blocks churn, the prefix stays.
		NodeCapacity: 100 * bench.TraceBlockTokens,
		Ranks:        []int{1, 2, 3},
		Core:         replicate.Options{HotHits: 8, MaxReplicas: 3},
	}
	runs, err := Simulate(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Setup != SetupReplicate || runs[1].Setup != SetupNoReplication {
		t.Fatalf("runs: %+v", runs)
	}
	on, off := runs[0], runs[1]
	// 120 accesses a minute of each prefix block: heat 120 asks for the
	// maximum, 3 replicas; without the core the prefix stays on one node.
	// The prefix blocks are the top 2 keys by replica samples.
	last := on.Samples[len(on.Samples)-1]
	if last.Replicas[0] != 3 || last.Replicas[1] != 3 || last.Replicas[2] > 1 {
		t.Fatalf("replicated: ranks 1-3 have %v replicas at the end, want 3 3 <=1", last.Replicas)
	}
	for _, s := range off.Samples {
		if s.Replicas[0] != 1 || s.Copies != 0 {
			t.Fatalf("without replication: %+v", s)
		}
	}
	if on.Copies < 4 || off.Copies != 0 {
		t.Fatalf("copies: %d with the core, %d without", on.Copies, off.Copies)
	}
	// Replication moves hits, it does not add any.
	if on.HitBlocks != off.HitBlocks || on.Blocks != off.Blocks || on.Blocks != 400*5 {
		t.Fatalf("hits %d/%d with the core, %d/%d without", on.HitBlocks, on.Blocks, off.HitBlocks, off.Blocks)
	}
	// The prefix is on 3 of 4 nodes instead of 1: far more hits are local.
	if on.LocalShare() < 2*off.LocalShare() {
		t.Fatalf("local share %.3f with the core, %.3f without", on.LocalShare(), off.LocalShare())
	}
	// One sample every 30 s over 200 s of trace, plus the end.
	if n := len(on.Samples); n != 7 || on.Samples[0].At != 30*time.Second {
		t.Fatalf("%d samples, first at %v", n, on.Samples[0].At)
	}

	// The same run again gives the same results.
	again, err := Simulate(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(runs, again) {
		t.Fatal("two runs of the same options differ")
	}

	r := Report(runs, o)
	if got := len(r.Results); got != 2+len(on.Samples)+len(off.Samples) {
		t.Fatalf("%d rows", got)
	}
	if row := r.Results[0]; row["ratio"] != on.LocalShare()/off.LocalShare() || row["baseline"] != SetupNoReplication {
		t.Fatalf("summary row %v", row)
	}
	if row := r.Results[2]; row["replicas_rank1"] != on.Samples[0].Replicas[0] || row["t_s"] != 30 {
		t.Fatalf("first sample row %v", row)
	}
	path := filepath.Join(t.TempDir(), "replication.png")
	if err := Plot(runs, o, path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("plot: %v, %d bytes", err, len(b))
	}
}

func TestReplicationRankByAccesses(t *testing.T) {
	// Block 7 is accessed most but never held twice; ranked by accesses it
	// is first, by replicas it is not necessarily.
	tr := benchtest.MustTrace(t, benchtest.Req(7), benchtest.Req(7), benchtest.Req(7), benchtest.Req(8))
	o := Options{Traces: []*bench.Trace{tr}, Nodes: 2, Ranks: []int{1, 5}, RankBy: RankByAccesses}
	runs, err := Simulate(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if got := runs[0].Ranked; len(got) != 2 || tr.HashID(got[0]) != 7 {
		t.Fatalf("ranked %v", got)
	}
	// Rank 5 does not exist: 0 replicas; the mean covers the 2 keys there are.
	if s := runs[0].Samples[0]; s.Replicas[1] != 0 || s.MeanTop[1] != 1 {
		t.Fatalf("sample %+v", s)
	}
}

func TestReplicationOptions(t *testing.T) {
	tr := hotPrefixTrace(t)
	for _, o := range []Options{
		{},
		{Traces: []*bench.Trace{tr}, Nodes: -1},
		{Traces: []*bench.Trace{tr}, NodeCapacity: 100},
		{Traces: []*bench.Trace{tr}, Tick: time.Minute, Sample: time.Second},
		{Traces: []*bench.Trace{tr}, Ranks: []int{0}},
		{Traces: []*bench.Trace{tr}, RankBy: "heat"},
		{Traces: []*bench.Trace{tr}, Core: replicate.Options{Window: time.Millisecond}},
		{Traces: []*bench.Trace{tr}, Core: replicate.Options{HotFactor: 0.5}},
	} {
		if _, err := Simulate(context.Background(), o); !errors.Is(err, bench.ErrOptions) {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func TestThinSamples(t *testing.T) {
	r := &bench.Report{}
	r.Add(bench.Row{"name": "a/x", "trace": "a", "setup": "x"})
	for i := range 7 {
		r.Add(bench.Row{"trace": "a", "setup": "x", "t_s": 30 * (i + 1)})
		r.Add(bench.Row{"trace": "a", "setup": "y", "t_s": 30 * (i + 1)})
	}
	got := ThinSamples(r, 3)
	var ts []any
	for _, row := range got.Results {
		ts = append(ts, row["t_s"])
	}
	// The summary row, then samples 3 and 6 of each run.
	want := []any{nil, 90, 90, 180, 180}
	if len(ts) != len(want) {
		t.Fatalf("rows %v, want %v", ts, want)
	}
	for i := range want {
		if ts[i] != want[i] {
			t.Fatalf("rows %v, want %v", ts, want)
		}
	}
}
