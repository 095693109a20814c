package resp

import (
	"context"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseRedisBenchmarkCSV(t *testing.T) {
	out := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"SET","29411.76","0.234","0.056","0.215","0.383","0.559","1.351"
"GET","35211.27","0.199","0.048","0.183","0.303","0.447","0.919"
`
	got, err := ParseRedisBenchmarkCSV(strings.NewReader(out))
	if err != nil || got["SET"] != 29411.76 || got["GET"] != 35211.27 || len(got) != 2 {
		t.Errorf("got %v, %v", got, err)
	}
	// Older redis-benchmark: no header, two columns.
	got, err = ParseRedisBenchmarkCSV(strings.NewReader("\"PING_INLINE\",\"1234.5\"\n"))
	if err != nil || got["PING_INLINE"] != 1234.5 {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := ParseRedisBenchmarkCSV(strings.NewReader("")); err == nil {
		t.Error("empty output accepted")
	}
	if _, err := ParseRedisBenchmarkCSV(strings.NewReader(`"SET","fast"`)); err == nil {
		t.Error("a non-number accepted")
	}
}

// TestRunRespVsRedis runs a tiny comparison end to end: both servers
// answer every request of the same redis-benchmark command lines.
func TestRunRespVsRedis(t *testing.T) {
	for _, p := range []string{"redis-server", "redis-benchmark"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s not installed (Debian packages redis-server, redis-tools)", p)
		}
	}
	o := Options{Sizes: []int64{4096, 64 << 10}, SmallSizes: []int64{28}, SmallClients: []int{8}, Bytes: 64 << 20, Quick: true, FlowChunkBytes: 64 << 10, FlowClients: 4,
		DRAMCapacity: 64 << 20, SSDCapacity: 64 << 20, Dir: t.TempDir(), MemoryKeys: 5000, MemoryDRAM: 16 << 20}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	named := map[string]map[string]any{}
	var cases []map[string]any
	for _, r := range rep.Results {
		if r["name"] == "resp" && r["op"] != "memory" {
			cases = append(cases, r)
			continue
		}
		names = append(names, r["name"].(string))
		named[r["name"].(string)] = r
		if r["op"] == "memory" {
			if r["fits"] != true || r["keys"] != 5000 || r["bytes_per_key"].(float64) <= 28 || r["redis_bytes_per_key"].(float64) <= 28 {
				t.Errorf("memory row %v", r)
			}
			continue
		}
		if r["ops_per_sec"].(float64) <= 0 || r["baseline_ops_per_sec"].(float64) <= 0 || r["baseline"] != "redis-server" {
			t.Errorf("row %v", r)
		}
		if want := r["ops_per_sec"].(float64) / r["baseline_ops_per_sec"].(float64); r["ratio"].(float64) != want {
			t.Errorf("row %v: ratio is not ops_per_sec/baseline_ops_per_sec", r)
		}
		if base := r["baseline_cpu_us_per_op"].(float64); base > 0 && r["cpu_ratio"].(float64) != r["cpu_us_per_op"].(float64)/base || !strings.HasPrefix(r["name"].(string)+"_", r["op"].(string)+"_") {
			t.Errorf("row %v: op or cpu_ratio", r)
		}
	}
	if got := strings.Join(names, ","); got != "set_4096,get_4096,set_4096_p16,get_4096_p16,set_65536,get_65536,set_28_c8,get_28_c8,incr_28_c8,exists_28_c8,lmcache_flow,resp" {
		t.Errorf("rows %s", got)
	}
	// Every case but the flow is also a "resp" row with the named row's
	// figures.
	if len(cases) != len(names)-2 {
		t.Errorf("%d resp case rows for %d named rows", len(cases), len(names)-2)
	}
	for _, r := range cases {
		n := named[r["row"].(string)]
		for _, k := range []string{"op", "value_bytes", "clients", "pipeline", "ops_per_sec", "baseline_ops_per_sec", "ratio", "cpu_ratio"} {
			if n == nil || r[k] != n[k] {
				t.Errorf("resp row %v: %s differs from its named row %v", r, k, n)
				break
			}
		}
	}
	if Runs(o) != 13 {
		t.Errorf("RespRuns = %d, want 13", Runs(o))
	}
}

// TestRunRespVsRedisPinned: with Pin the client runs on CPU 0 and the
// servers elsewhere, and this process gets its CPUs and GOMAXPROCS back.
func TestRunRespVsRedisPinned(t *testing.T) {
	for _, p := range []string{"redis-server", "redis-benchmark", "taskset"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s not installed (Debian packages redis-server, redis-tools, util-linux)", p)
		}
	}
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil || !before.IsSet(0) || before.Count() < 2 {
		t.Skip("pinning needs CPU 0 and another")
	}
	procs := runtime.GOMAXPROCS(0)
	o := Options{Sizes: []int64{4096}, Pipeline: 1, Bytes: 32 << 20, Quick: true, Pin: true, NoSmall: true, NoFlow: true, NoMemory: true,
		DRAMCapacity: 64 << 20, SSDCapacity: 64 << 20, Dir: t.TempDir()}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 4 { // set_4096 and get_4096, each also as a resp row
		t.Fatalf("%d rows", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r["pinned"] != true || r["redis_io_threads"] != 1 || r["ops_per_sec"].(float64) <= 0 {
			t.Errorf("row %v", r)
		}
	}
	var after unix.CPUSet
	unix.SchedGetaffinity(0, &after)
	if after != before || runtime.GOMAXPROCS(0) != procs {
		t.Errorf("CPUs %d and GOMAXPROCS %d afterwards, want %d and %d", after.Count(), runtime.GOMAXPROCS(0), before.Count(), procs)
	}
}

// TestMeasureMemory: keys that fit the node's DRAM budget are all kept and
// the row says so; twice as many keys as the budget holds do not fit, and
// the row says that too, the DRAM tier still within its capacity.
func TestMeasureMemory(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (Debian package redis-server)")
	}
	f := func(keys int, budget int64, fits bool) {
		t.Helper()
		m, err := measureMemory(t.Context(), Options{RedisServer: "redis-server"}, t.TempDir(), keys, 28, budget)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d keys in %d bytes: %+v", keys, budget, m)
		if m.Fits != fits || m.DRAMUsed > budget {
			t.Errorf("%d keys in %d bytes: fits %v (want %v), %d bytes of DRAM used", keys, budget, m.Fits, fits, m.DRAMUsed)
		}
		if fits && (m.BytesPerKey < 28 || m.BytesPerKey > m.ChargedPerKey || m.RedisBytesPerKey < 28) {
			t.Errorf("bytes per key %.0f (charged %.0f), redis-server %.0f", m.BytesPerKey, m.ChargedPerKey, m.RedisBytesPerKey)
		}
	}
	f(20000, 16<<20, true)
	f(40000, 4<<20, false)
}

func TestMemoryKey(t *testing.T) {
	for i, want := range map[int]string{0: "key:000000000000", 42: "key:000000000042", 123456789012: "key:123456789012"} {
		if got := string(memoryKey([]byte("x"), i)); got != "x"+want {
			t.Errorf("memoryKey(%d) = %q, want %q", i, got, "x"+want)
		}
	}
}

// NoSmall leaves out the small-value rows and no other; NoFlow the flow's.
func TestCasesNoSmallKeepsFlow(t *testing.T) {
	f := func(o Options, wantSmall, wantFlow bool) {
		t.Helper()
		o.ensureDefaults()
		var small, flow bool
		for _, c := range o.cases() {
			small = small || c.small
			flow = flow || c.flow
		}
		if small != wantSmall || flow != wantFlow {
			t.Errorf("%+v: small rows %v, flow row %v; want %v, %v", o, small, flow, wantSmall, wantFlow)
		}
	}
	f(Options{}, true, true)
	f(Options{NoSmall: true}, false, true)
	f(Options{NoFlow: true}, true, false)
	f(Options{NoSmall: true, NoFlow: true}, false, false)
}
