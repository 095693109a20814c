package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/client"
)

// The console's pages are public (they hold no data); everything they show
// comes from /v1 calls that need a token.
func TestConsolePages(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(n.srv.URL + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET /ui: %d to %q, want 301 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	f := func(path string, status int, ctype, contains string) {
		t.Helper()
		r := do(t, n, "GET", path, "", nil, nil)
		if r.status != status {
			t.Fatalf("GET %s: %d, want %d", path, r.status, status)
		}
		if status != 200 {
			return
		}
		if got := r.header.Get("Content-Type"); !strings.HasPrefix(got, ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", path, got, ctype)
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") || !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: CSP %q keeps the page to its origin only loosely", path, csp)
		}
		if !strings.Contains(string(r.body), contains) {
			t.Errorf("GET %s: body lacks %q", path, contains)
		}
	}
	f("/ui/", 200, "text/html", `<script src="app.js"`)
	f("/ui/app.js", 200, "text/javascript", "const READS")
	f("/ui/style.css", 200, "text/css", "@media")
	f("/ui/nothing.js", 404, "", "")
	// Nothing on the pages reaches out of the node: no CDN, no fonts.
	for _, name := range []string{"index.html", "app.js", "style.css"} {
		b := do(t, n, "GET", "/ui/"+name, "", nil, nil).body
		if m := regexp.MustCompile(`(?:src|href)="(?:https?:)?//`).Find(b); m != nil {
			t.Errorf("%s loads from another origin: %s", name, m)
		}
	}
}

// consoleReads parses the READS list of the console's script: every call
// the pages make.
func consoleReads(t *testing.T) [][2]string {
	t.Helper()
	src, err := os.ReadFile("console/assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	list := regexp.MustCompile(`(?s)const READS = \[(.*?)\];`).FindSubmatch(src)
	if list == nil {
		t.Fatal("app.js has no READS list")
	}
	var out [][2]string
	for _, m := range regexp.MustCompile(`"([A-Z]+) ([^"]+)"`).FindAllSubmatch(list[1], -1) {
		if method := string(m[1]); method != "GET" && method != "POST" {
			t.Errorf("the console makes a %s call: %s", method, m[0])
		}
		out = append(out, [2]string{string(m[1]), string(m[2])})
	}
	if len(out) < 10 {
		t.Fatalf("READS lists %d calls: %q", len(out), list[1])
	}
	return out
}

// Every call the console makes goes through the API's authentication:
// without a token 401, with a tenant's token 403 where the figures span
// tenants; and none of them, made by any caller, changes the store.
func TestConsoleReadsAuth(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true, conductor: true})
	ctx := t.Context()
	keys := chain(t, nsAlpha, 3, 9)
	ca := n.client(t, tokAlpha)
	for _, k := range keys {
		if _, err := ca.Put(ctx, nsAlpha, k, payload(1, 512)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ca.CreateContext(ctx, client.ContextSpec{Namespace: nsAlpha, Keys: keys[:1], TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	keysJSON, _ := json.Marshal(keys)
	bodies := map[string]string{
		"/v1/keys":            `{"namespace":"alpha/llama","tokens":[1,2,3]}`,
		"/v1/batch/exists":    `{"namespace":"alpha/llama","keys":` + string(keysJSON) + `}`,
		"/v1/cluster/holders": `{"keys":` + string(keysJSON) + `}`,
	}
	// Figures of every tenant: admin only.
	adminOnly := func(path string) bool {
		return strings.HasPrefix(path, "/v1/stats") || strings.HasPrefix(path, "/v1/cluster") || strings.HasPrefix(path, "/v1/conductor")
	}
	routes := map[string]bool{}
	for _, r := range n.api.Engine().Routes() {
		routes[r.Method+" "+r.Path] = true
	}
	before := storeState(t, n.store)
	for _, rd := range consoleReads(t) {
		method, path := rd[0], rd[1]
		t.Run(method+" "+path, func(t *testing.T) {
			if !routes[method+" "+path] {
				t.Fatalf("the console calls %s %s, which is not a route", method, path)
			}
			var body []byte
			if method == "POST" {
				body = []byte(bodies[path])
			}
			if r := do(t, n, method, path, "", nil, body); r.status != http.StatusUnauthorized {
				t.Errorf("without a token: %d %s, want 401", r.status, r.body)
			}
			r := do(t, n, method, path, tokAlpha, nil, body)
			switch {
			case adminOnly(path) && r.status != http.StatusForbidden:
				t.Errorf("with a tenant's token: %d %s, want 403", r.status, r.body)
			case !adminOnly(path) && r.status != http.StatusOK:
				t.Errorf("with a tenant's token: %d %s, want 200", r.status, r.body)
			}
			// An admin reads it (a node alone has no cluster: 404).
			r = do(t, n, method, path, tokAdmin, nil, body)
			if want := http.StatusOK; r.status != want && !(strings.HasPrefix(path, "/v1/cluster") && r.status == http.StatusNotFound) {
				t.Errorf("with an admin's token: %d %s", r.status, r.body)
			}
		})
	}
	if after := storeState(t, n.store); after != before {
		t.Fatalf("the console's calls changed the store:\nbefore %s\nafter  %s", before, after)
	}
	// A tenant's context list holds its own contexts only.
	var list struct {
		Contexts []struct {
			Namespace string `json:"namespace"`
		} `json:"contexts"`
	}
	if err := json.Unmarshal(do(t, n, "GET", "/v1/contexts", tokBeta, nil, nil).body, &list); err != nil || len(list.Contexts) != 0 {
		t.Fatalf("another tenant lists %v (%v)", list.Contexts, err)
	}
}

// The history ends with the live figures: after N puts the last sample
// counts N blocks and the requests made.
func TestStatsHistory(t *testing.T) {
	n := startNode(t, nodeOpts{})
	ctx := t.Context()
	c := n.client(t, "")
	keys := chain(t, nsAlpha, 4, 11)
	for _, k := range keys {
		if _, err := c.Put(ctx, nsAlpha, k, payload(2, 256)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Get(ctx, keys[0], client.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	r := do(t, n, "GET", "/v1/stats/history", "", nil, nil)
	var h historyResponse
	if err := json.Unmarshal(r.body, &h); err != nil || r.status != 200 {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	if h.IntervalSeconds != 5 || len(h.Samples) < 2 {
		t.Fatalf("interval %v with %d samples, want 5 s and the first sample plus the live one", h.IntervalSeconds, len(h.Samples))
	}
	first, last := h.Samples[0], h.Samples[len(h.Samples)-1]
	if last.Blocks != 4 || last.Hits < 1 || last.Requests < 5 || !last.Time.After(first.Time) && !last.Time.Equal(first.Time) {
		t.Fatalf("live sample %+v after 4 puts and a read (first %+v)", last, first)
	}
	// The HTTP front end's requests and their latency over the interval
	// that ends with the live sample; each tier's fill.
	fe, ok := last.FrontEnds["http"]
	if !ok || fe.Requests != last.Requests || !fe.Timed || fe.P50 == nil || fe.P99 == nil || *fe.P50 <= 0 || *fe.P99 < *fe.P50 {
		t.Fatalf("live sample's HTTP front end %+v (ok %v, %d requests)", fe, ok, last.Requests)
	}
	if len(last.Tiers) == 0 || last.Tiers[0].Blocks != 4 || last.Tiers[0].Used <= 0 || last.Tiers[0].Capacity < last.Tiers[0].Used {
		t.Fatalf("live sample's tiers %+v after 4 puts", last.Tiers)
	}
	var st statsResponse
	if err := json.Unmarshal(do(t, n, "GET", "/v1/stats", "", nil, nil).body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Node == "" || st.Requests <= last.Requests || st.Store.Blocks != 4 {
		t.Fatalf("stats node %q, %d requests (history saw %d), %d blocks", st.Node, st.Requests, last.Requests, st.Store.Blocks)
	}
}

// The Redis front end's commands are timed for the console: the live
// history sample carries their count and p50/p99, from a node as Start
// serves it.
func TestStatsHistoryTimesRedis(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTP.Listen, cfg.RESP.Listen, cfg.Transfer.Listen, cfg.Shm.Listen = "127.0.0.1:0", "127.0.0.1:0", "", ""
	cfg.DRAM.Capacity, cfg.SSD.Capacity = 16<<20, 16<<20
	cfg.Conductor.Enabled = false
	cfg.Logger, cfg.Banner = slog.New(slog.DiscardHandler), io.Discard
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	c, err := net.Dial("tcp", n.Addr("resp").String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The percentiles are of the interval since the sample before the live
	// one, which the sampler may take at any moment: commands, then the
	// history, until an interval holds some.
	for try := 1; ; try++ {
		if _, err := io.WriteString(c, "PING\r\nSET k v\r\nGET k\r\n"); err != nil {
			t.Fatal(err)
		}
		want := "+PONG\r\n+OK\r\n$1\r\nv\r\n"
		got := make([]byte, len(want))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
			t.Fatalf("replies %q (%v)", got, err)
		}
		resp, err := http.Get("http://" + n.Addr("http").String() + "/v1/stats/history")
		if err != nil {
			t.Fatal(err)
		}
		var h historyResponse
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil || len(h.Samples) == 0 {
			t.Fatalf("history: %v", err)
		}
		fe, ok := h.Samples[len(h.Samples)-1].FrontEnds["redis"]
		if !ok || fe.Requests < int64(3*try) || !fe.Timed {
			t.Fatalf("live sample's Redis front end %+v (ok %v), want %d timed commands", fe, ok, 3*try)
		}
		if fe.P50 != nil && fe.P99 != nil && *fe.P50 > 0 && *fe.P99 >= *fe.P50 {
			return
		}
		if try == 10 {
			t.Fatalf("live sample's Redis front end %+v has no percentiles", fe)
		}
	}
}
