package bench

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// tracePath locates a published Mooncake trace: in $YUEBING_TRACES if set,
// else in ../shared/traces beside the module root. Traces are not part of
// the repository; tests that need one skip when it is absent.
func tracePath(t testing.TB, file string) string {
	t.Helper()
	dir := os.Getenv("YUEBING_TRACES")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "..", "shared", "traces")
	}
	p := filepath.Join(dir, file)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("trace %s is not available (%v); set YUEBING_TRACES to the folder with the Mooncake traces", file, err)
	}
	return p
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
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
