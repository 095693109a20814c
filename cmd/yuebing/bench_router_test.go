package main

import (
	"bytes"
	"encoding/json"
	"errors"
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

	root = newRootCmd()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"bench", "router", "--requests", "-1"})
	var ue usageError
	if err := root.Execute(); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--requests") {
		t.Fatalf("error %v, want a usage error naming --requests", err)
	}
}
