package server

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/yuebing/yuebing/server/auth"
)

// TestAuthThrottleHTTP: past its burst of wrong tokens an address is
// answered 429 with Retry-After and the JSON error body, without its token
// being looked at (the right one included), until its bucket refills;
// another address is unaffected, and /metrics counts both. The clock is
// frozen, so nothing here is timed.
func TestAuthThrottleHTTP(t *testing.T) {
	toks, err := auth.Parse([]byte(testTokens))
	if err != nil {
		t.Fatal(err)
	}
	if toks, err = toks.WithThrottle(auth.ThrottleOptions{
		Failures: 3, Interval: time.Minute, Now: func() time.Time { return time.Unix(1_000_000, 0) },
	}); err != nil {
		t.Fatal(err)
	}
	api, err := NewAPI(APIOptions{Store: newTestStore(t, t.TempDir(), 16<<20), Tokens: toks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	from := func(local string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		tr := &http.Transport{DialContext: d.DialContext}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	get := func(c *http.Client, path, token string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	f := func(c *http.Client, token string, status int, code, retryAfter string) {
		t.Helper()
		resp, body := get(c, "/v1/stats", token)
		var e errorBody
		if status != http.StatusOK {
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("error body %q: %v", body, err)
			}
		}
		if resp.StatusCode != status || e.Error.Code != code || resp.Header.Get("Retry-After") != retryAfter {
			t.Fatalf("token %q: %d %q Retry-After %q, want %d %q %q (body %s)", token, resp.StatusCode, e.Error.Code,
				resp.Header.Get("Retry-After"), status, code, retryAfter, body)
		}
	}
	local, other := from("127.0.0.1"), from("127.0.0.2")
	f(local, tokAdmin, 200, "", "")
	for range 3 {
		f(local, "wrong-token-0123456789", 401, "unauthenticated", "")
	}
	f(local, "", 401, "unauthenticated", "") // no token guesses nothing and is not refused
	f(local, "wrong-token-0123456789", 429, "too_many_auth_failures", "60")
	f(local, tokAdmin, 429, "too_many_auth_failures", "60")
	f(other, tokAdmin, 200, "", "")
	f(other, "wrong-token-0123456789", 401, "unauthenticated", "")

	_, metrics := get(local, "/metrics", "")
	for _, want := range []string{"yuebing_auth_failures_total 4\n", "yuebing_auth_throttled_total 2\n"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestAuthThrottleConductor: the standalone conductor's API counts wrong
// tokens against the same limiter and answers 429 past the burst.
func TestAuthThrottleConductor(t *testing.T) {
	toks, err := auth.Parse([]byte(testTokens))
	if err != nil {
		t.Fatal(err)
	}
	if toks, err = toks.WithThrottle(auth.ThrottleOptions{
		Failures: 2, Interval: time.Minute, Now: func() time.Time { return time.Unix(1_000_000, 0) },
	}); err != nil {
		t.Fatal(err)
	}
	r := gin.New()
	r.GET("/probe", authenticator(toks), func(c *gin.Context) { c.Status(http.StatusNoContent) })
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	f := func(token string, status int, retryAfter string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/probe", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != status || resp.Header.Get("Retry-After") != retryAfter {
			t.Fatalf("token %q: %d Retry-After %q, want %d %q", token, resp.StatusCode, resp.Header.Get("Retry-After"), status, retryAfter)
		}
	}
	f(tokAdmin, 204, "")
	f("wrong-token-0123456789", 401, "")
	f("wrong-token-0123456789", 401, "")
	f("wrong-token-0123456789", 429, "60")
	f(tokAdmin, 429, "60")
}
