package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/enginesim"
	"github.com/yuebing/yuebing/scheduler"
)

// BenchmarkRouterChat4k measures the latency the router adds to a chat of
// about 4,000 tokens (a long system prompt and a new question each time,
// the shape of a conversation's next turn), tokenization included: the
// same chat sent to a yuebing engine simulator directly and through the
// router (its HTTP hop, parsing, tokenizing, keying, the decision,
// forwarding), alternately in the same run. "cold" makes every message
// new, so nothing comes from the tokenizer's cache. "local" tokenizes in
// the router, "engine" asks the engine's /tokenize (vLLM's endpoint) for
// the ids. It reports the p50 of each and the p50 of the differences.
func BenchmarkRouterChat4k(b *testing.B) {
	e, err := enginesim.New(enginesim.Options{
		Layout:    adapter.Layout{Name: "test", Layers: 2, KVHeads: 1, HeadDim: 8, DTypeBytes: 2, BlockTokens: testBS, GroupLayers: 1},
		Namespace: testNS, Model: testModel, PoolBlocks: 8192, TimeScale: 1e-6, Logger: quietLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	eng := httptest.NewServer(e.Handler())
	defer eng.Close()
	fronts := map[string]string{}
	for _, source := range []string{TokenizeLocal, TokenizeEngine} {
		r, err := New(Options{Model: testModel, Namespace: testNS, BlockSize: testBS, Tokenize: source, ProbeInterval: time.Hour,
			// The engine's time is scaled down: nothing it is sent is too much.
			Scheduler: scheduler.Options{Rejection: scheduler.RejectNone},
			Engines:   []Engine{{ID: "e0", URL: eng.URL}}, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		go r.Run(ctx)
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			body, _ := io.ReadAll(req.Body)
			if err := r.Serve(req.Context(), ChatCompletions, body, w); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
			}
		}))
		defer front.Close()
		fronts[source] = front.URL
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	post := func(url string, body []byte) time.Duration {
		start := time.Now()
		resp, err := client.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: status %d: %s", url, resp.StatusCode, raw)
		}
		return time.Since(start)
	}
	system := strings.Repeat("You are a careful assistant of a large inference cluster; answer in full sentences and cite the blocks you read. ", 180)
	for _, run := range []struct{ source, mode string }{
		{TokenizeLocal, "warm"}, {TokenizeLocal, "cold"}, {TokenizeEngine, "warm"}, {TokenizeEngine, "cold"},
	} {
		mode, front := run.mode, fronts[run.source]
		b.Run(run.source+"/"+mode, func(b *testing.B) {
			var direct, routed, added []float64
			i := 0
			for b.Loop() {
				i++
				sys := system
				if mode == "cold" {
					sys = fmt.Sprintf("Session %d. %s", i, system)
				}
				chat := func(n int) []byte {
					body, _ := json.Marshal(map[string]any{"model": testModel, "max_tokens": 1, "messages": []map[string]string{
						{"role": "system", "content": sys},
						{"role": "user", "content": fmt.Sprintf("Question %d: which blocks hold turn %d?", n, n)},
					}})
					return body
				}
				// The engine has the prompt cached either way: the same
				// system prompt, and a warm-up for the cold one's.
				post(eng.URL, chat(-i))
				d := post(eng.URL, chat(2*i))
				rt := post(front, chat(2*i+1))
				direct, routed, added = append(direct, ms(d)), append(routed, ms(rt)), append(added, ms(rt-d))
			}
			b.ReportMetric(p50(direct), "direct-p50-ms")
			b.ReportMetric(p50(routed), "router-p50-ms")
			b.ReportMetric(p50(added), "added-p50-ms")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func p50(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
