package python

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

func TestRunNoPackage(t *testing.T) {
	err := Run(t.Context(), Options{PythonDir: t.TempDir()})
	if !errors.Is(err, ErrNoPackage) {
		t.Fatalf("error %v, want ErrNoPackage", err)
	}
}

// TestRun runs the repository's Python benchmark on one small size against
// the node Run serves: one JSON object, a row per op and path.
func TestRun(t *testing.T) {
	if _, err := os.Stat(DefaultPython); err != nil {
		t.Skipf("%s is absent: the Python benchmark needs it (apt-get install python3)", DefaultPython)
	}
	if testing.Short() {
		t.Skip("-short: the Python benchmark's smoke run is left to the full run")
	}
	var out, errOut bytes.Buffer
	err := Run(t.Context(), Options{PythonDir: "../../python", DRAMCapacity: 128 << 20, DataDir: t.TempDir(),
		Sizes: "64KiB", Quick: true, JSON: true, Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var rep struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
	}
	names := map[string]bool{}
	for _, r := range rep.Results {
		names[r["name"].(string)] = true
	}
	for _, want := range []string{"get_into/64KiB/shm", "get_into/64KiB/socket", "put_from/64KiB/shm", "put_from/64KiB/socket"} {
		if !names[want] {
			t.Errorf("no row %s in %v", want, names)
		}
	}
}
