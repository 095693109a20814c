package bench

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// wideValue is a plausible wide value for a field of a synthetic row.
func wideValue(field string) any {
	switch field {
	case "layout":
		return "llama-3-8b-256"
	case "routing":
		return "prefix_aware"
	case "mode", "transport", "path", "node":
		return "router"
	case "errors", "failed", "rejected", "nodes", "goroutines", "clients", "pipeline", "threads", "concurrency", "prompts", "copies", "drops":
		return 128
	case "requests", "hot_blocks", "local_hits", "remote_hits", "max_replicas", "peak_node_fetches", "capacity_tokens":
		return 4_000_000
	}
	if strings.HasSuffix(field, "_bytes") || field == "block_size" {
		return int64(16 << 20)
	}
	if strings.Contains(field, "rate") || strings.HasSuffix(field, "_frac") || strings.HasSuffix(field, "_share") ||
		field == "compute_saved" || field == "effective_capacity" || field == "gap_closed" {
		return 0.987
	}
	if field == "ratio" {
		return 12.34
	}
	return 12345.678
}

// TestHumanTablesFit prints each harness's human table from synthetic rows
// of wide values: every line fits TableWidth, name is the first column and
// every chosen column is there; --json keeps every field.
func TestHumanTablesFit(t *testing.T) {
	harnesses := make([]string, 0, len(HumanColumns))
	for h := range HumanColumns {
		harnesses = append(harnesses, h)
	}
	sort.Strings(harnesses)
	for _, h := range harnesses {
		t.Run(h, func(t *testing.T) {
			groups := HumanColumns[h]
			r := &Report{Human: groups}
			for key, cols := range groups {
				for i := range 3 {
					row := Row{"name": key + strings.Repeat("x", 12+i), "unshown_figure": 1.5}
					for _, c := range cols {
						row[c] = wideValue(c)
					}
					r.Add(row)
				}
			}
			var buf bytes.Buffer
			if err := r.WriteTable(&buf); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			tables := strings.Split(strings.TrimRight(out, "\n"), "\n\n")
			if len(tables) != len(groups) {
				t.Fatalf("%d tables for %d groups:\n%s", len(tables), len(groups), out)
			}
			for _, table := range tables {
				lines := strings.Split(table, "\n")
				for _, l := range lines {
					if n := utf8.RuneCountInString(l); n > TableWidth {
						t.Errorf("line of %d columns:\n%s", n, l)
					}
				}
				header := strings.Fields(lines[0])
				if header[0] != "name" {
					t.Errorf("first column %q, want name:\n%s", header[0], table)
				}
				var key string
				for k := range groups {
					if strings.HasPrefix(strings.Fields(lines[1])[0], k) && len(k) >= len(key) {
						key = k
					}
				}
				for _, c := range groups[key] {
					if !slices.Contains(header, Header(c)) {
						t.Errorf("column %s (%s) left out:\n%s", c, Header(c), table)
					}
				}
				if strings.Contains(table, "unshown") {
					t.Errorf("a field not chosen is shown:\n%s", table)
				}
			}
			buf.Reset()
			if err := r.WriteJSON(&buf); err != nil {
				t.Fatal(err)
			}
			var got struct{ Results []map[string]any }
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			for i, row := range got.Results {
				if len(row) != len(r.Results[i]) || row["unshown_figure"] == nil {
					t.Errorf("JSON row %d has %d fields, want %d: %v", i, len(row), len(r.Results[i]), row)
				}
			}
		})
	}
}

func TestFormatCell(t *testing.T) {
	f := func(field string, v any, want string) {
		t.Helper()
		if got := FormatCell(field, v); got != want {
			t.Errorf("FormatCell(%q, %v) = %q, want %q", field, v, got, want)
		}
	}
	f("ratio", 1.234, "1.23x")
	f("hit_rate", 0.6123, "61.2%")
	f("saved_frac", 1.0, "100.0%")
	f("block_bytes", int64(1<<20), "1 MiB")
	f("block_bytes", 1536, "1.5 KiB")
	f("requests", 4_500_000, "4.5M")
	f("gbps", 12.345, "12.35")
	f("gbps", nil, "-")
	f("mode", "pool", "pool")
}

// TestTableNameCut keeps a long name's start and end.
func TestTableNameCut(t *testing.T) {
	r := &Report{}
	r.Add(Row{"name": strings.Repeat("a", 30) + strings.Repeat("b", 30), "gbps": 1.0})
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	name := strings.Fields(strings.Split(buf.String(), "\n")[1])[0]
	if utf8.RuneCountInString(name) != nameWidth || !strings.HasPrefix(name, "aaa") || !strings.HasSuffix(name, "bbb") {
		t.Fatalf("name cut to %q", name)
	}
}
