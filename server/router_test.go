package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/router"
)

// simCompletions simulates an engine's completions endpoint (no LLM runs
// here): three streamed chunks, then [DONE].
func simCompletions(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t%d\"}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func newRouterServer(t *testing.T, ttftSLO time.Duration) *httptest.Server {
	t.Helper()
	eng := simCompletions(t)
	cc := DefaultConductorConfig()
	cc.TTFTSLO = ttftSLO
	var errs []string
	cc.resolve(func(field, format string, args ...any) { errs = append(errs, field+": "+fmt.Sprintf(format, args...)) })
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	rc := RouterConfig{Model: "m", Namespace: "acme/m", BlockSize: 16, RetryAfter: 2500 * time.Millisecond,
		Engines: []router.Engine{{ID: "e0", URL: eng.URL}}}
	r, err := router.New(rc.options(cc))
	if err != nil {
		t.Fatal(err)
	}
	go r.Run(t.Context())
	h, err := routerHandler(r)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestRouterAPI(t *testing.T) {
	s := newRouterServer(t, time.Minute)

	resp := post(t, s.URL+"/v1/completions", `{"model":"m","prompt":"hello there","stream":true}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	if len(events) != 4 || events[3] != "[DONE]" {
		t.Fatalf("events %q", events)
	}

	check := func(what string, resp *http.Response, status int, code, typ string) {
		t.Helper()
		var e struct {
			Error struct{ Code, Type, Message string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != status || e.Error.Code != code || e.Error.Type != typ || e.Error.Message == "" {
			t.Fatalf("%s: status %d, error %+v (%v), want %d %s %s", what, resp.StatusCode, e, err, status, code, typ)
		}
	}
	f := func(body string, status int, code string) {
		t.Helper()
		check(body, post(t, s.URL+"/v1/completions", body), status, code, "invalid_request_error")
	}
	f(`{"model":"other","prompt":"x"}`, http.StatusNotFound, "model_not_found")
	f(`{"model":"m","prompt":[-1]}`, http.StatusBadRequest, "invalid_request")
	f(`[`, http.StatusBadRequest, "invalid_request")
	// vLLM's health path, and OpenAI's answer to a wrong method.
	for path, status := range map[string]int{"/health": http.StatusOK, "/healthz": http.StatusOK} {
		hr, err := http.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		hr.Body.Close()
		if hr.StatusCode != status {
			t.Errorf("GET %s: %d", path, hr.StatusCode)
		}
	}
	gr, err := http.Get(s.URL + "/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	defer gr.Body.Close()
	check("GET /v1/completions", gr, http.StatusMethodNotAllowed, "method_not_allowed", "invalid_request_error")

	mr, err := http.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Body.Close()
	var models struct {
		Data []struct{ ID string }
	}
	if err := json.NewDecoder(mr.Body).Decode(&models); err != nil || len(models.Data) != 1 || models.Data[0].ID != "m" {
		t.Fatalf("models %+v %v", models, err)
	}
}

func TestRouterAPIRejectsWith429(t *testing.T) {
	s := newRouterServer(t, time.Nanosecond)
	resp := post(t, s.URL+"/v1/completions", `{"model":"m","prompt":"hello"}`)
	var e struct {
		Error struct{ Code string }
	}
	json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "3" || e.Error.Code != "overloaded" {
		t.Fatalf("status %d, Retry-After %q, code %q; want 429, 3, overloaded", resp.StatusCode, resp.Header.Get("Retry-After"), e.Error.Code)
	}
}
