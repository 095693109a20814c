package bench

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// tracePath locates a published Mooncake trace in the repository's traces/
// folder (traces/README.md); tests run in the package's directory.
func tracePath(t testing.TB, file string) string {
	t.Helper()
	p := filepath.Join("..", "traces", file)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("trace %s: %v", file, err)
	}
	return p
}

var (
	traceCacheMu sync.Mutex
	traceCache   = map[string]*Trace{}
)

// openTestTrace opens a published trace once per test binary.
func openTestTrace(t testing.TB, file string) *Trace {
	t.Helper()
	p := tracePath(t, file)
	traceCacheMu.Lock()
	defer traceCacheMu.Unlock()
	if tr, ok := traceCache[p]; ok {
		return tr
	}
	tr, err := OpenTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	traceCache[p] = tr
	return tr
}
