package benchtest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/yuebing/yuebing/bench"
)

// TracePath locates a published Mooncake trace in the repository's traces/
// folder (traces/README.md), from this file's place in the tree, so a test
// finds it whichever bench package it runs in.
func TracePath(t testing.TB, file string) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(self), "..", "..", "traces", file)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("trace %s: %v", file, err)
	}
	return p
}

var (
	traceCacheMu sync.Mutex
	traceCache   = map[string]*bench.Trace{}
)

// OpenTestTrace opens a published trace once per test binary.
func OpenTestTrace(t testing.TB, file string) *bench.Trace {
	t.Helper()
	p := TracePath(t, file)
	traceCacheMu.Lock()
	defer traceCacheMu.Unlock()
	if tr, ok := traceCache[p]; ok {
		return tr
	}
	tr, err := bench.OpenTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	traceCache[p] = tr
	return tr
}

func MustTrace(t *testing.T, reqs ...bench.Request) *bench.Trace {
	t.Helper()
	tr, err := bench.NewTrace("t", reqs)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// Req makes a request of full 512-token blocks.
func Req(ids ...uint64) bench.Request {
	return bench.Request{InputLength: len(ids) * bench.TraceBlockTokens, HashIDs: ids}
}

// WantErrors fails t unless err is an error whose text holds every one of
// wants: a harness's flag check names every bad flag in one error.
func WantErrors(t testing.TB, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}
