package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yuebing/yuebing/bench"
)

// TestSoakTableFits prints the soak's verdict with long map values: one
// figure a line, name first, every line within bench.TableWidth.
func TestSoakTableFits(t *testing.T) {
	r := &bench.Report{}
	status := map[string]int{}
	for _, code := range []string{"200", "404", "429", "500", "502", "503", "504", "507"} {
		status[code+"_responses_from_a_long_named_path"] = 123456
	}
	r.Add(bench.Row{"name": "soak", "passed": true, "requests": 4470000, "max_rss_bytes": int64(3 << 30),
		"router_status": status, "errors_by_op": map[string]int{"get": 3, "put": 1}})
	r.Add(bench.Row{"name": "soak_node", "node": "n1", "max_rss_bytes": int64(1 << 30), "rss_bound_bytes": int64(2 << 30), "starts": 4})
	var buf bytes.Buffer
	if err := soakTable(r).WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if f := strings.Fields(lines[0]); len(f) != 2 || f[0] != "name" {
		t.Fatalf("header %q", lines[0])
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > bench.TableWidth {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	for _, want := range []string{"passed", "true", "4.5M", "3 GiB", "router_status", "node n1 rss / bound", "1 GiB / 2 GiB (4 starts)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	t.Log("\n" + out)
}
