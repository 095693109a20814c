package main

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// dashboardQueries returns every PromQL expression of the Grafana
// dashboard: its panels' targets and its variables' queries.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../docs/grafana/yuebing.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("docs/grafana/yuebing.json: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	return exprs
}

// exportedNames scrapes /metrics and returns every sample name in it
// (histograms as their _bucket, _sum and _count series).
func exportedNames(t *testing.T, n *cnode) map[string]bool {
	t.Helper()
	code, body, _ := n.do(t, "GET", "/metrics", nil, nil)
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		names[name] = true
	}
	return names
}

// Every metric the Grafana dashboard queries is exported by a running
// node with every part on: cluster, transfer, Redis front end, conductor.
func TestGrafanaDashboardMetrics(t *testing.T) {
	exprs := dashboardQueries(t)
	if testing.Short() {
		t.Skip("starts a cluster node: not in -short (the dashboard parsed)")
	}
	metric := regexp.MustCompile(`\b(?:yuebing|process|go)_[a-z0-9_]+\b`)
	queried := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metric.FindAllString(e, -1) {
			queried[m] = true
		}
	}
	// The dashboard covers each part of a node.
	for _, part := range []string{"yuebing_tier_", "yuebing_store_", "yuebing_http_request_duration_seconds_bucket", "yuebing_cluster_",
		"yuebing_transfer_", "yuebing_resp_", "yuebing_conductor_"} {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(queried)), func(m string) bool { return strings.HasPrefix(m, part) }) {
			t.Errorf("the dashboard has no panel over %s*", part)
		}
	}

	root := t.TempDir()
	n := serveCluster(t, "a", filepath.Join(root, "a"), "--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0")
	waitCluster(t, n)
	// Traffic, so labelled series (per route, per tier) exist.
	k := chainKeys(t, 1, 3)[0]
	n.put(t, k, testData(1, 1000), 0)
	n.get(t, k, testData(1, 1000))
	respAddr := n.banner["resp"]
	if respAddr == "" {
		t.Fatalf("no RESP listener in the banner: %v", n.banner)
	}
	respCall(t, strings.TrimPrefix(respAddr, "redis://"), "PING")

	var names map[string]bool
	waitFor(t, 30*time.Second, "every queried metric exported", func() string {
		names = exportedNames(t, n)
		var missing []string
		for m := range queried {
			if !names[m] {
				missing = append(missing, m)
			}
		}
		slices.Sort(missing)
		return strings.Join(missing, ", ")
	})
	// The figures are the node's: a cluster of one that it leads, the
	// RESP command and the HTTP put it served.
	_, body, _ := n.do(t, "GET", "/metrics", nil, nil)
	for _, want := range []string{"yuebing_cluster_members 1", "yuebing_cluster_is_leader 1", "yuebing_cluster_has_leader 1",
		"yuebing_resp_commands_total 1", "yuebing_store_blocks 1", `yuebing_conductor_decisions_total{result="accepted"} 0`,
		`yuebing_conductor_instances{role="prefill"} 0`} {
		if !strings.Contains(string(body), "\n"+want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// What the node exports that no panel shows: worth a panel, or a reason.
	var unshown []string
	for m := range names {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(m, "yuebing_") && !queried[m] && !queried[base+"_bucket"] && !queried[base+"_count"] {
			unshown = append(unshown, m)
		}
	}
	if len(unshown) > 0 {
		slices.Sort(unshown)
		t.Logf("exported but on no panel: %s", strings.Join(unshown, ", "))
	}
}
