package soak

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/bench"
)

func TestS3FlagsParse(t *testing.T) {
	f := func(fl S3Flags, want ...string) S3Options {
		t.Helper()
		o, err := fl.Parse()
		if len(want) == 0 && err != nil {
			t.Fatalf("%+v: %v", fl, err)
		}
		if len(want) > 0 && err == nil {
			t.Fatalf("%+v: no error, want %q", fl, want)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q lacks %q", fl, err, w)
			}
		}
		return o
	}
	if o := f(S3Flags{}); o.Enabled() {
		t.Errorf("no flags: S3 enabled: %+v", o)
	}
	o := f(S3Flags{Local: true, Capacity: "1GiB", SegmentSize: "1MiB", KillAt: time.Minute})
	if !o.Local || o.Capacity != 1<<30 || o.SegmentSize != 1<<20 || o.KillAt != time.Minute {
		t.Errorf("local: %+v", o)
	}
	if o := f(S3Flags{Local: true, NoKill: true}); o.KillAt >= 0 {
		t.Errorf("--no-s3-kill: kill at %s", o.KillAt)
	}
	f(S3Flags{Endpoint: "127.0.0.1:9000", Bucket: "b", CredentialsFile: "/etc/s3.yaml"})
	f(S3Flags{Capacity: "1GiB"}, "--s3-*: want --s3")
	f(S3Flags{Local: true, Capacity: "lots", SegmentSize: "1x"}, "--s3-capacity: ", "--s3-segment-size: ")
	f(S3Flags{Local: true, Bucket: "b"}, "leave out --s3-endpoint")
	f(S3Flags{Endpoint: "127.0.0.1:9000"}, "--s3-endpoint and --s3-bucket go together")
	f(S3Flags{Endpoint: "h:1", Bucket: "b", KillAt: time.Second}, "an external bucket is never killed")
	f(S3Flags{Local: true, DownFor: -time.Second}, "--s3-down-for -1s")
}

func TestS3OptionsValidate(t *testing.T) {
	base := Options{Binary: "yuebing", Duration: time.Minute, Engines: -1}
	f := func(s3 S3Options, want string) {
		t.Helper()
		o := base
		o.S3 = s3
		o.EnsureDefaults()
		err := o.Validate()
		if want == "" {
			if err != nil {
				t.Errorf("%+v: %v", s3, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: error %v, want %q", s3, err, want)
		}
	}
	gw := "/bin/true" // Validate only needs a path; nothing runs
	f(S3Options{Local: true, Versitygw: gw}, "")
	f(S3Options{Endpoint: "h:1", Bucket: "b"}, "")
	f(S3Options{Local: true, Versitygw: gw, Capacity: 1 << 20}, "s3: capacity")
	f(S3Options{Local: true, Versitygw: gw, SegmentSize: 1 << 10}, "s3: segment size")
	f(S3Options{Local: true, Versitygw: gw, KillAt: 50 * time.Second, DownFor: 20 * time.Second}, "within the duration")
	f(S3Options{Bucket: "b"}, "needs both an endpoint and a bucket")

	// Defaults: the capacity holds the working set past DRAM+SSD, the kill
	// falls inside the run, an external bucket is never killed.
	o := base
	o.S3 = S3Options{Local: true, Versitygw: gw}
	o.EnsureDefaults()
	if o.S3.Capacity != 4*(o.DRAMCapacity+o.SSDCapacity) || o.S3.KillAt != 24*time.Second || o.S3.DownFor != 12*time.Second ||
		!strings.HasPrefix(o.S3.Namespace, "yuebing-soak/") {
		t.Errorf("defaults %+v", o.S3)
	}
	if o.RSSBound(0) != (&Options{DRAMCapacity: o.DRAMCapacity, MaxInflightBytes: o.MaxInflightBytes}).RSSBound(0)+5*o.S3.SegmentSize {
		t.Errorf("RSS bound %d does not count the S3 upload buffer", o.RSSBound(0))
	}
	o = base
	o.S3 = S3Options{Endpoint: "h:1", Bucket: "b"}
	o.EnsureDefaults()
	if o.S3.KillAt >= 0 {
		t.Errorf("external bucket: kill at %s", o.S3.KillAt)
	}
}

func TestParseS3Metrics(t *testing.T) {
	page := `# HELP yuebing_tier_degraded 1 while ...
yuebing_tier_degraded{tier="s3"} 1
yuebing_tier_degraded{tier="ssd"} 0
yuebing_tier_puts_total{tier="s3"} 120
yuebing_tier_puts_total{tier="ssd"} 999
yuebing_tier_hits_total{tier="s3"} 7
yuebing_s3_requests_total{op="get",result="error"} 2
yuebing_s3_requests_total{op="put",result="error"} 3
yuebing_s3_requests_total{op="put",result="ok"} 50
yuebing_s3_dropped_puts_total 4
`
	m, degraded, err := parseS3Metrics([]byte(page))
	if err != nil || !degraded || m["demoted"] != 120 || m["hits"] != 7 || m["request_errors"] != 5 || m["dropped"] != 4 {
		t.Fatalf("%v degraded %v: %v", m, degraded, err)
	}
	if _, _, err := parseS3Metrics([]byte("yuebing_tier_degraded{tier=\"ssd\"} 0\n")); err == nil {
		t.Error("a node without an S3 tier: no error")
	}
}

// TestS3StateRestarts: a node's counters start again at each restart; the
// totals keep what every life counted, degraded time adds up only while
// the tier says so, and the outage counts as seen only when every node's
// tier reported it: node b, restarted through the outage, reports it
// after the server's restart; node c, whose requests failed during the
// outage, never does, and fails the run; node d sent the bucket nothing
// while it was down and is named idle, not failed.
func TestS3StateRestarts(t *testing.T) {
	nodes := []*bench.Node{{Proc: bench.Proc{Name: "a"}}, {Proc: bench.Proc{Name: "b"}}, {Proc: bench.Proc{Name: "c"}}, {Proc: bench.Proc{Name: "d"}}}
	var st s3State
	t0 := time.Unix(1000, 0)
	st.observe("a", 1, map[string]float64{"hits": 10, "demoted": 5}, false, t0)
	st.observe("b", 1, nil, true, t0) // degraded before the kill: not the outage
	st.observe("c", 1, map[string]float64{"request_errors": 1}, false, t0)
	st.observe("d", 1, map[string]float64{"request_errors": 2}, false, t0)
	st.down, st.kills = true, 1
	st.observe("a", 1, map[string]float64{"hits": 12, "demoted": 6}, true, t0.Add(time.Second))
	st.observe("a", 1, map[string]float64{"hits": 12, "demoted": 6}, true, t0.Add(3*time.Second))
	st.observe("c", 1, map[string]float64{"request_errors": 3}, false, t0.Add(3*time.Second))
	st.observe("d", 1, map[string]float64{"request_errors": 2}, false, t0.Add(3*time.Second))
	st.down, st.restartedAt = false, t0.Add(3500*time.Millisecond)
	st.observe("a", 2, map[string]float64{"hits": 3, "demoted": 1}, false, t0.Add(4*time.Second))
	st.observe("b", 2, nil, true, t0.Add(4*time.Second))
	st.observe("a", 2, map[string]float64{"hits": 4, "demoted": 2}, false, t0.Add(5*time.Second))
	st.observe("b", 2, nil, false, t0.Add(5*time.Second))
	st.observe("c", 1, nil, false, t0.Add(5*time.Second))
	s := &soak{nodes: nodes}
	s.s3.nodes, s.s3.kills, s.s3.recovered = st.nodes, st.kills, t0.Add(5*time.Second)
	r := s.s3Result()
	if r.Hits != 16 || r.Demoted != 8 || r.DegradedSeconds != 2 || r.Nodes != 4 || r.DegradedNodes != 2 ||
		!slices.Equal(r.NotDegraded, []string{"c", "d"}) || !slices.Equal(r.IdleNodes, []string{"d"}) ||
		r.DegradedSeen || !r.Failed() {
		t.Fatalf("%+v", r)
	}
	if st.inOutage() {
		t.Error("in outage with the server up and no tier degraded")
	}
	// Once c's tier reports it too, the outage was seen by every node.
	st.observe("c", 1, map[string]float64{"request_errors": 3}, true, t0.Add(3200*time.Millisecond))
	if r := s.s3Result(); !r.DegradedSeen || r.Failed() {
		t.Fatalf("every node degraded: %+v", r)
	}
}

// TestFaultsExclude: a node's kill cycle and the S3 outage hold one token,
// so one waits for the other to end and gives up when the load ends.
func TestFaultsExclude(t *testing.T) {
	s := &soak{faults: make(chan struct{}, 1)}
	if !s.holdFaults(t.Context()) {
		t.Fatal("a free token not taken")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if s.holdFaults(ctx) {
		t.Fatal("a held token taken twice")
	}
	got := make(chan bool)
	go func() { got <- s.holdFaults(t.Context()) }()
	s.releaseFaults()
	if !<-got {
		t.Fatal("the token not taken once released")
	}
}
