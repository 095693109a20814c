package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestReportJSON(t *testing.T) {
	var r Report
	r.Add(Row{"name": "dram_get", "gbps": 10.5, "baseline": "copy", "baseline_gbps": 12.0, "ratio": 0.875})
	r.Add(Row{"name": "odd", "gbps": math.NaN()})
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("want exactly one line, got %q", buf.String())
	}
	var got struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Results) != 2 || got.Results[0]["ratio"] != 0.875 || got.Results[1]["gbps"] != nil {
		t.Fatalf("decoded %+v", got.Results)
	}
	var empty Report
	buf.Reset()
	_ = empty.WriteJSON(&buf)
	if strings.TrimSpace(buf.String()) != `{"results":[]}` {
		t.Fatalf("empty report = %q", buf.String())
	}
}

func TestReportTable(t *testing.T) {
	r := Report{Columns: []string{"name", "gbps"}}
	r.Add(Row{"name": "a", "gbps": 1.234, "ratio": 0.5})
	r.Add(Row{"name": "b", "gbps": 12345.0})
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table has %d lines:\n%s", len(lines), buf.String())
	}
	if f := strings.Fields(lines[0]); strings.Join(f, ",") != "name,gbps,ratio" {
		t.Fatalf("header %q", lines[0])
	}
	if f := strings.Fields(lines[1]); strings.Join(f, ",") != "a,1.23,0.50x" {
		t.Fatalf("row 1 %q", lines[1])
	}
	if f := strings.Fields(lines[2]); strings.Join(f, ",") != "b,12345,-" {
		t.Fatalf("row 2 %q", lines[2])
	}
}

func TestProgressQuietWhenNotTerminal(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgressTo(&buf, false, "x", 10)
	p.Add(5)
	p.Done()
	if buf.Len() != 0 {
		t.Fatalf("non-terminal progress wrote %q", buf.String())
	}
	p = NewProgressTo(&buf, true, "x", 10)
	p.Add(10)
	p.Done()
	if !strings.Contains(buf.String(), "100%") {
		t.Fatalf("terminal progress wrote %q", buf.String())
	}
}
