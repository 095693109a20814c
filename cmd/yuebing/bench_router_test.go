package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestBenchRouter(t *testing.T) {
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"bench", "router", "--json", "--requests", "20", "--prompt-tokens", "64"})
	if err := root.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var rep struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(rep.Results) != 2 || rep.Results[0]["path"] != "direct" || rep.Results[1]["path"] != "router" ||
		rep.Results[1]["baseline"] != "direct" || rep.Results[1]["ratio"] == nil || rep.Results[0]["requests"] != 20.0 {
		t.Fatalf("rows %v", rep.Results)
	}
	// The fields other tools read stay as they were; the human table shows
	// fewer.
	for i, want := range []string{
		"name,p50_ms,p99_ms,path,prompt_tokens,requests",
		"added_p50_ms,baseline,baseline_p50_ms,name,p50_ms,p99_ms,path,prompt_tokens,ratio,requests",
	} {
		keys := slices.Sorted(maps.Keys(rep.Results[i]))
		if got := strings.Join(keys, ","); got != want {
			t.Errorf("row %d fields %s, want %s", i, got, want)
		}
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr not a terminal, yet %q", errOut.String())
	}

	root = newRootCmd()
	out.Reset()
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"bench", "router", "--requests", "20", "--prompt-tokens", "64"})
	if err := root.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || strings.Fields(lines[0])[0] != "name" || !strings.Contains(lines[2], "0.") {
		t.Fatalf("table:\n%s", out.String())
	}
	for _, l := range lines {
		if len(l) > 100 {
			t.Errorf("line of %d columns: %q", len(l), l)
		}
	}

	root = newRootCmd()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"bench", "router", "--requests", "-1"})
	var ue usageError
	if err := root.Execute(); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--requests") {
		t.Fatalf("error %v, want a usage error naming --requests", err)
	}
}
