package router

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/router"
	"github.com/yuebing/yuebing/server"
)

// Options configures Run.
type Options struct {
	// Requests per path. Default 2000.
	Requests int
	// PromptTokens per request, sent as token ids. Default 2048.
	PromptTokens int
	// Progress, if set, ticks once per request.
	Progress *bench.Progress
}

// Run measures what the router adds to a request: the same
// completion sent one at a time over loopback straight to an engine's HTTP
// face (the baseline) and through `yuebing conductor`'s router, alternating
// in rounds of 100. The engine is simulated and answers at once (no LLM
// runs here), so the difference is the router's: reading and parsing the
// request, its chained keys, Algorithm 1, the speculative entry, forwarding.
func Run(ctx context.Context, o Options) (*bench.Report, error) {
	if o.Requests == 0 {
		o.Requests = 2000
	}
	if o.PromptTokens == 0 {
		o.PromptTokens = 2048
	}
	if o.Requests < 1 || o.PromptTokens < 1 {
		return nil, fmt.Errorf("%w: requests and prompt tokens must be positive", bench.ErrOptions)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	eng := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"cmpl-0","object":"text_completion","choices":[{"index":0,"text":"ok","finish_reason":"length"}]}`)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go eng.Serve(ln)
	defer eng.Close()
	engURL := "http://" + ln.Addr().String()

	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- server.RunRouter(ctx, server.RouterOptions{
			Listen: "127.0.0.1:0", Banner: pw,
			Router: server.RouterConfig{Model: "m", Namespace: "bench/m", BlockSize: 16, ProbeInterval: time.Hour,
				Engines: []router.Engine{{ID: "e0", URL: engURL}}},
			Conductor: server.DefaultConductorConfig(),
		})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("bench: router did not start: %w", errors.Join(err, <-done))
	}
	go io.Copy(io.Discard, pr)
	routerURL := strings.TrimSpace(strings.TrimPrefix(line, "conductor listening on "))

	toks := make([]string, o.PromptTokens)
	for i := range toks {
		toks[i] = fmt.Sprint(i % 50000)
	}
	body := `{"model":"m","max_tokens":8,"prompt":[` + strings.Join(toks, ",") + `]}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	call := func(url string) (time.Duration, error) {
		start := time.Now()
		resp, err := client.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("bench: %s answered %d", url, resp.StatusCode)
		}
		return time.Since(start), nil
	}
	var direct, routed []time.Duration
	for len(direct) < o.Requests {
		for _, p := range []struct {
			url string
			lat *[]time.Duration
		}{{engURL, &direct}, {routerURL, &routed}} {
			for range min(100, o.Requests-len(*p.lat)) {
				d, err := call(p.url)
				if err != nil {
					return nil, err
				}
				*p.lat = append(*p.lat, d)
				o.Progress.Add(1)
			}
		}
	}
	o.Progress.Done()
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	q := func(l []time.Duration, f float64) float64 {
		s := slices.Clone(l)
		slices.Sort(s)
		return s[min(int(f*float64(len(s))), len(s)-1)].Seconds() * 1e3
	}
	rep := &bench.Report{Columns: []string{"name", "path", "requests", "prompt_tokens", "p50_ms", "p99_ms", "added_p50_ms", "baseline", "baseline_p50_ms", "ratio"}}
	rep.Human = bench.HumanColumns["router"]
	rep.Add(bench.Row{"name": "router_overhead", "path": "direct", "requests": len(direct), "prompt_tokens": o.PromptTokens,
		"p50_ms": q(direct, .5), "p99_ms": q(direct, .99)})
	rep.Add(bench.Row{"name": "router_overhead", "path": "router", "requests": len(routed), "prompt_tokens": o.PromptTokens,
		"p50_ms": q(routed, .5), "p99_ms": q(routed, .99), "added_p50_ms": q(routed, .5) - q(direct, .5),
		"baseline": "direct", "baseline_p50_ms": q(direct, .5), "ratio": q(direct, .5) / q(routed, .5)})
	return rep, nil
}
