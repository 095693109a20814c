package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/yuebing/yuebing/client"
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
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got := logMessages(path)
	want := map[string]int64{"WARN ssd: no room to keep a pinned block; dropping it": 2, "ERROR boom": 1}
	if !maps.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}
