package scheduler

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

// The default profile is the paper model's output, and the fit reproduces
// the model: the model lies in the fitted polynomial space.
func TestDefaultProfile(t *testing.T) {
	var b bytes.Buffer
	if err := WritePaperProfile(&b, DefaultMFU); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), DefaultProfile()) {
		t.Fatal("profiles/llama3-70b-8xa800.csv is not WritePaperProfile(DefaultMFU); regenerate it")
	}
	m := DefaultPrefillModel()
	for _, tc := range []struct{ n, p int }{{1000, 0}, {12035, 4000}, {8192, 8192}, {100_000, 50_000}, {3000, 2999}} {
		want := PaperPrefillSeconds(tc.n, tc.p, DefaultMFU)
		if got := m.Seconds(tc.n, tc.p); math.Abs(got-want) > 1e-5+1e-5*want { // the CSV keeps 6 digits
			t.Errorf("T(%d, %d) = %v, want %v", tc.n, tc.p, got, want)
		}
	}
	// A sanity anchor: 8k tokens are 80*26*8192^3 = 1.14 PFLOP, at 50%
	// MFU of 8 x 312 TFLOPS 0.92 s.
	if s := m.Seconds(8192, 0); s < 0.9 || s > 0.93 {
		t.Errorf("T(8192, 0) = %v s, want about 0.92 s", s)
	}
	if m.Seconds(5000, 6000) != m.Seconds(5000, 5000) {
		t.Error("a prefix longer than the prompt is not capped at the prompt")
	}
}

// Fitting noisy measurements of a real-looking engine recovers it within
// the noise.
func TestFitPrefillNoisy(t *testing.T) {
	truth := func(n, p float64) float64 { return 0.02 + 3e-5*(n-p) + 2e-10*(n*n-p*p) }
	var samples []PrefillSample
	i := 0
	for _, n := range []int{512, 1024, 4096, 16384, 65536} {
		for _, p := range []int{0, n / 3, n / 2, n - 256} {
			noise := 1 + 0.01*float64(i%5-2) // ±2%, deterministic
			samples = append(samples, PrefillSample{n, p, truth(float64(n), float64(p)) * noise})
			i++
		}
	}
	m, err := FitPrefill(samples)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ n, p int }{{2000, 0}, {30000, 10000}} {
		want := truth(float64(s.n), float64(s.p))
		if got := m.Seconds(s.n, s.p); math.Abs(got-want)/want > 0.05 {
			t.Errorf("T(%d, %d) = %v, want %v within 5%%", s.n, s.p, got, want)
		}
	}
}

func TestFitDecode(t *testing.T) {
	csv := "batch_size,kv_tokens,seconds\n"
	var rows []string
	for _, b := range []int{1, 8, 32, 64} {
		for _, kv := range []int{1000, 100_000, 800_000} {
			rows = append(rows, strings.Join([]string{itoa(b), itoa(kv), ftoa(0.015 + 0.0005*float64(b) + 6e-8*float64(kv))}, ","))
		}
	}
	m, err := ParseDecodeProfile(strings.NewReader(csv + strings.Join(rows, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Seconds(16, 400_000), 0.015+0.008+0.024; math.Abs(got-want) > 1e-9 {
		t.Errorf("TBT(16, 400k) = %v, want %v", got, want)
	}
	if m.Seconds(0, 0) != 0 {
		t.Error("an empty batch has a TBT")
	}
	if Slowdown(2_000_000, 1_000_000) != 2 || Slowdown(10, 0) != 1 || Slowdown(10, 100) != 1 {
		t.Error("Slowdown")
	}
}

func TestProfileErrors(t *testing.T) {
	f := func(csv, want string) {
		t.Helper()
		_, err := ParsePrefillProfile(strings.NewReader(csv))
		if !errors.Is(err, ErrProfile) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want ErrProfile mentioning %q", csv, err, want)
		}
	}
	f("", "empty")
	f("# only a comment\n", "empty")
	f("n,p,s\n", "header")
	f("input_len,prefix_len,seconds\n1,0\n", "2 fields")
	f("input_len,prefix_len,seconds\n0,0,1\n", "input_len")
	f("input_len,prefix_len,seconds\n10,11,1\n", "prefix_len")
	f("input_len,prefix_len,seconds\n10,1.5,1\n", "prefix_len")
	f("input_len,prefix_len,seconds\n10,1,-1\n", "seconds")
	f("input_len,prefix_len,seconds\n10,1,NaN\n", "seconds")
	f("input_len,prefix_len,seconds\n10,1,1\n", "samples")
	// Enough rows but one input length: n and n^2 cannot be told apart.
	f("input_len,prefix_len,seconds\n"+strings.Repeat("1000,0,1\n1000,500,0.5\n", 4), "determine")
	if _, err := ReadDecodeProfile(strings.NewReader("batch_size,kv_tokens,seconds\n0,1,1\n")); !errors.Is(err, ErrProfile) {
		t.Errorf("batch 0: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{BalancingThreshold: 0.5, TTFTSLO: -1, Bandwidth: -1, Policy: 9, Rejection: 9}
	o.EnsureDefaults()
	err := o.Validate()
	for _, want := range []string{"policy", "rejection", "threshold", "TTFT SLO", "bandwidth"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
	var zero Options
	zero.EnsureDefaults()
	if err := zero.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	for _, s := range []string{"random", "load", "cache-local", "cache-global", "round-robin"} {
		if p, err := ParsePolicy(s); err != nil || p.String() != s {
			t.Errorf("ParsePolicy(%q) = %v, %v", s, p, err)
		}
	}
	for alias, want := range map[string]Policy{
		"conductor": PolicyCacheGlobal, "least_loaded": PolicyLoad, "least-loaded": PolicyLoad, "round_robin": PolicyRoundRobin,
	} {
		if p, err := ParsePolicy(alias); err != nil || p != want {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v", alias, p, err, want)
		}
	}
	for _, bad := range []string{"", "roundrobin", "Conductor", "least loaded"} {
		if _, err := ParsePolicy(bad); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "round_robin") {
			t.Errorf("ParsePolicy(%q) = %v, want ErrOptions naming the choices", bad, err)
		}
	}
	for _, s := range []string{"none", "early", "predicted"} {
		if r, err := ParseRejection(s); err != nil || r.String() != s {
			t.Errorf("ParseRejection(%q) = %v, %v", s, r, err)
		}
	}
}

func itoa(n int) string     { return strconv.Itoa(n) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
