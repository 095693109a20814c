package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/router"
)

func TestSoakValue(t *testing.T) {
	for _, size := range []int{soakHeaderSize, soakHeaderSize + 1, 4 << 10, 300_001, 3 << 20} {
		b := make([]byte, size)
		fillSoakValue(b, kindRESP, 42, 7)
		v, err := parseSoakValue(b)
		if err != nil || v != (soakValue{kind: kindRESP, slot: 42, version: 7}) {
			t.Fatalf("size %d: %+v, %v", size, v, err)
		}
		// Another version of the slot is other bytes.
		c := make([]byte, size)
		fillSoakValue(c, kindRESP, 42, 8)
		if size > soakHeaderSize && string(b[soakHeaderSize:]) == string(c[soakHeaderSize:]) {
			t.Errorf("size %d: versions 7 and 8 have the same payload", size)
		}
		// Any flipped bit of the header or the payload is caught; so is
		// a value cut short or run long.
		for _, at := range []int{0, 4, 6, 8, 15, 16, 23, 24, 28, 31, soakHeaderSize, size / 2, size - 1} {
			if at >= size {
				continue
			}
			d := append([]byte(nil), b...)
			d[at] ^= 0x10
			if _, err := parseSoakValue(d); !errors.Is(err, errNotSoak) {
				t.Errorf("size %d, byte %d flipped: %v", size, at, err)
			}
		}
		if _, err := parseSoakValue(b[:size-1]); !errors.Is(err, errNotSoak) {
			t.Errorf("size %d cut short: %v", size, err)
		}
		if _, err := parseSoakValue(append(b, 0)); !errors.Is(err, errNotSoak) {
			t.Errorf("size %d run long: %v", size, err)
		}
	}
}

func FuzzParseSoakValue(f *testing.F) {
	b := make([]byte, 100)
	fillSoakValue(b, kindBlock, 1, 2)
	f.Add(b)
	f.Add([]byte("YBSK"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseSoakValue(b)
		if err != nil {
			return
		}
		// What parses is a value of its own stated length whose payload
		// matches its checksum: refilling it gives the same header.
		c := make([]byte, len(b))
		fillSoakValue(c, v.kind, v.slot, v.version)
		if string(c[8:24]) != string(b[8:24]) {
			t.Fatalf("parsed %+v from a header that refills differently", v)
		}
	})
}

func respReply(in string) (string, []byte, error) {
	rc := &respConn{r: bufio.NewReader(strings.NewReader(in))}
	return rc.reply()
}

func TestRESPReply(t *testing.T) {
	f := func(in, simple, bulk string, isNil bool, wantErr string) {
		t.Helper()
		s, b, err := respReply(in)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("%q: error %v, want %q", in, err, wantErr)
			}
			return
		}
		if err != nil || s != simple || string(b) != bulk || (b == nil) != isNil {
			t.Errorf("%q: %q %q (nil %v) %v", in, s, b, b == nil, err)
		}
	}
	f("+OK\r\n", "OK", "", true, "")
	f(":12\r\n", "12", "", true, "")
	f("$3\r\nabc\r\n", "", "abc", false, "")
	f("$0\r\n\r\n", "", "", false, "")
	f("$-1\r\n", "", "", true, "")
	f("-ERR no room\r\n", "", "", true, "resp: ERR no room")
	f("$x\r\n", "", "", true, "bad bulk length")
	f("$5\r\nab", "", "", true, "EOF")
	f("$99999999999\r\n", "", "", true, "more than")
	f("*2\r\n", "", "", true, "unexpected reply")
	f("\r\n", "", "", true, "empty reply")
	var re *respError
	if _, _, err := respReply("-WRONGTYPE x\r\n"); !errors.As(err, &re) || errorKind(err) != "resp_wrongtype" {
		t.Errorf("error reply: %v, kind %s", err, errorKind(err))
	}
}

func FuzzRESPReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "$3\r\nabc\r\n", "$-1\r\n", "-ERR x\r\n", ":1\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, b, err := respReply(in)
		if err == nil && b != nil && !strings.Contains(in, string(b)) {
			t.Fatalf("%q: bulk %q is not in the input (simple %q)", in, b, s)
		}
	})
}

func TestErrorKind(t *testing.T) {
	f := func(err error, want string) {
		t.Helper()
		if got := errorKind(err); got != want {
			t.Errorf("%v: %s, want %s", err, got, want)
		}
	}
	f(&client.Error{StatusCode: 429, Code: "overloaded"}, "http_429")
	f(fmt.Errorf("put: %w", &client.Error{StatusCode: 503}), "http_503")
	f(&respError{"ERR no space"}, "resp_err")
	f(fmt.Errorf("dial: %w", syscall.ECONNREFUSED), "conn_refused")
	f(fmt.Errorf("read: %w", syscall.ECONNRESET), "conn_reset")
	f(io.ErrUnexpectedEOF, "conn_reset")
	f(context.DeadlineExceeded, "timeout")
	f(errors.New("something"), "other")
}

func TestLogMessages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.log")
	log := `--- start 1 at 2026-11-26T11:31:30Z
time=2026-11-26T11:31:05.621Z level=WARN msg="ssd: no room to keep a pinned block; dropping it" key=f0 err="ssd: waiting for space: context canceled"
time=2026-11-26T11:31:05.622Z level=WARN msg="ssd: no room to keep a pinned block; dropping it" key=e2
time=2026-11-26T11:31:06Z level=ERROR msg=boom
time=2026-11-26T11:31:07Z level=INFO msg="not counted"
panic: something
2026/11/27 20:41:07 WARN router: engine failed after the answer started; the client sees a cut stream err="engine e0: unexpected EOF"
2026/11/27 20:41:08 WARN router: engine failed after the answer started; the client sees a cut stream err=x
2026/11/27 20:41:09 ERROR router: no engine
2026/11/27 20:41:09 INFO router: not counted k=v
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got := bench.LogMessages(path)
	want := map[string]int64{"WARN ssd: no room to keep a pinned block; dropping it": 2, "ERROR boom": 1,
		"WARN router: engine failed after the answer started; the client sees a cut stream": 2, "ERROR router: no engine": 1}
	if !maps.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

// TestSoakRouterOutcomes: the router load's checks tell a whole answer
// from a cut stream and a malformed body, and count a 5xx other than 503
// always, a 503 only with every engine up, and a cut answer only with
// every engine up, as faults.
func TestSoakRouterOutcomes(t *testing.T) {
	var answer atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answer.Load().([2]string)
		w.Header().Set(router.HeaderEngine, "e1")
		w.Header().Set(router.HeaderPrefixTokens, "32")
		code, _ := strconv.Atoi(a[0])
		w.WriteHeader(code)
		io.WriteString(w, a[1])
	}))
	defer srv.Close()
	s := &soak{o: Options{Log: io.Discard}, start: time.Now()}
	rt := &soakRouter{s: s, url: srv.URL, hc: srv.Client(),
		status: map[string]int64{}, byKind: map[string]int64{}, servedBy: map[string]int64{}, prefixHits: map[string]int64{}}
	f := func(code, body string, stream, outage bool, want string, wantFaults int64) {
		t.Helper()
		answer.Store([2]string{code, body})
		if outage {
			rt.outages.Add(1)
		}
		before := rt.bad5xx.Load() + rt.outside503.Load() + rt.badAnswers.Load()
		rt.call(t.Context(), "completion", completionBody([]int{1, 2, 3}, 1, stream), stream, 3)
		if outage {
			rt.outages.Add(-1)
		}
		got := rt.bad5xx.Load() + rt.outside503.Load() + rt.badAnswers.Load() - before
		outcome, _, _, _, _ := rt.exchange(t.Context(), srv.URL+"/v1/completions", nil, stream)
		if outcome != want || got != wantFaults {
			t.Errorf("%s %q (stream %v, outage %v): %s and %d faults, want %s and %d", code, body, stream, outage, outcome, got, want, wantFaults)
		}
	}
	f("200", `{"choices":[{"text":"x"}]}`, false, false, "200", 0)
	f("200", "data: {}\n\ndata: [DONE]\n\n", true, false, "200", 0)
	f("200", "data: {}\n\n", true, false, "stream_cut", 1)
	f("200", "data: {}\n\n", true, true, "stream_cut", 0)
	f("200", `{"choices":[]}`, false, false, "bad_answer", 1)
	f("429", `{"error":{}}`, false, false, "429", 0)
	f("503", `{"error":{}}`, false, true, "503", 0)
	f("503", `{"error":{}}`, false, false, "503", 1)
	f("502", `{"error":{}}`, false, true, "502", 1)
	f("500", `{"error":{}}`, false, false, "500", 1)
	if rt.servedBy["e1"] != 2 || rt.prefixTokens.Load() != 32*10 || rt.promptTokens.Load() != 30 || len(rt.faults) != 5 {
		t.Errorf("served by %v, prefix tokens %d, prompt tokens %d, faults %q", rt.servedBy, rt.prefixTokens.Load(), rt.promptTokens.Load(), rt.faults)
	}
}
