package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/router"
)

// BenchmarkRouterOverhead measures what the router adds to a request: the
// same completion sent straight to an engine's HTTP face and through the
// router (parse, keys, Algorithm 1, forward), one at a time over loopback.
// The engine answers at once (a simulated engine: no LLM runs here), so the
// difference is the router's. It reports each path's p50 latency.
func BenchmarkRouterOverhead(b *testing.B) {
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"ok","finish_reason":"length"}]}`)
	}))
	defer eng.Close()
	cc := DefaultConductorConfig()
	cc.resolve(func(field, format string, args ...any) { b.Fatalf(field+": "+format, args...) })
	rc := RouterConfig{Model: "m", Namespace: "acme/m", BlockSize: 16, ProbeInterval: time.Hour,
		Engines: []router.Engine{{ID: "e0", URL: eng.URL}}}
	r, err := router.New(rc.options(cc))
	if err != nil {
		b.Fatal(err)
	}
	go r.Run(b.Context())
	h, err := routerHandler(r, nil)
	if err != nil {
		b.Fatal(err)
	}
	rs := httptest.NewServer(h)
	defer rs.Close()

	toks := make([]string, 2048)
	for i := range toks {
		toks[i] = fmt.Sprint(i % 50000)
	}
	body := `{"model":"m","max_tokens":8,"prompt":[` + strings.Join(toks, ",") + `]}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	run := func(b *testing.B, url string) {
		lat := make([]time.Duration, 0, 1024)
		for b.Loop() {
			start := time.Now()
			resp, err := client.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.Run("direct", func(b *testing.B) { run(b, eng.URL) })
	b.Run("router", func(b *testing.B) { run(b, rs.URL) })
}
