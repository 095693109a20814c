package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// A request line or header block over maxHeaderBytes gets the API's JSON
// error, not net/http's plain-text answer, from a node as Start serves it.
func TestOversizedHeadersAnswerJSON(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTP.Listen, cfg.RESP.Listen, cfg.Transfer.Listen = "127.0.0.1:0", "", ""
	cfg.DRAM.Capacity, cfg.SSD.Capacity = 16<<20, 16<<20
	cfg.Conductor.Enabled = false
	cfg.Logger, cfg.Banner = slog.New(slog.DiscardHandler), io.Discard
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	base := "http://" + n.Addr("http").String()

	f := func(path string, hdr map[string]string, wantStatus int, wantCode string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var body errorBody
		if resp.StatusCode != wantStatus || json.Unmarshal(b, &body) != nil || body.Error.Code != wantCode || body.Error.Message == "" {
			t.Fatalf("GET with a %d-byte path: %d %.200s, want %d with code %q", len(path), resp.StatusCode, b, wantStatus, wantCode)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("Content-Type %q", ct)
		}
	}
	key := strings.Repeat("a", 100_000)
	f("/v1/blocks/"+key, nil, http.StatusRequestURITooLong, "uri_too_long")
	f("/v1/objects/"+key, nil, http.StatusRequestURITooLong, "uri_too_long")
	f("/no/such/route/"+key, nil, http.StatusRequestURITooLong, "uri_too_long")
	f("/v1/stats", map[string]string{"X-Pad": key}, http.StatusRequestHeaderFieldsTooLarge, "headers_too_large")
	// Just under the limit, the request is the handler's.
	f("/v1/blocks/"+strings.Repeat("a", 60_000), nil, http.StatusBadRequest, "invalid_key")
}
