package resp

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

var testLimits = limits{maxArgs: 1 << 20, maxBulk: 512 << 20, maxRequest: 1 << 20}

// readAll parses every command in data, streaming long arguments to
// io.Discard, and returns them with their long arguments as "<n bytes>".
func readAll(t testing.TB, data []byte, lim limits) ([][]string, error) {
	r := newReader(bytes.NewReader(data), lim)
	var cmds [][]string
	for {
		n, err := r.begin()
		if err != nil {
			return cmds, err
		}
		var cmd []string
		for range n {
			arg, big, err := r.next()
			if err != nil {
				return cmds, err
			}
			if big > 0 {
				if err := r.stream(discard{}); err != nil {
					return cmds, err
				}
				cmd = append(cmd, "<"+itoa(big)+" bytes>")
				continue
			}
			cmd = append(cmd, string(arg))
		}
		// An inline command is one line, bounded by maxLine instead.
		if len(r.arena) > max(lim.maxRequest, maxLine) || len(r.spans) > n {
			t.Fatalf("arena of %d bytes and %d spans for a command of %d arguments", len(r.arena), len(r.spans), n)
		}
		cmds = append(cmds, cmd)
	}
}

type discard struct{}

func (discard) ReadFrom(r io.Reader) (int64, error) { return io.Copy(io.Discard, r) }

func itoa(n int64) string { return string(appendInt(nil, n)) }

func appendInt(b []byte, n int64) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

func TestReader(t *testing.T) {
	f := func(in string, want []string, wantErr string) {
		t.Helper()
		cmds, err := readAll(t, []byte(in), testLimits)
		var got []string
		for _, c := range cmds {
			got = append(got, strings.Join(c, "|"))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%q: commands %q, want %q", in, got, want)
		}
		switch {
		case wantErr == "" && err != io.EOF:
			t.Errorf("%q: error %v, want EOF", in, err)
		case wantErr != "" && (err == nil || err.Error() != wantErr):
			t.Errorf("%q: error %v, want %q", in, err, wantErr)
		}
	}
	f("*1\r\n$4\r\nPING\r\n", []string{"PING"}, "")
	f("*2\r\n$3\r\nGET\r\n$0\r\n\r\n*0\r\n*-1\r\n*1\r\n$1\r\nx\r\n", []string{"GET|", "x"}, "")
	f("PING\r\nSET a \"b c\"\n\r\n  \r\nGET 'x y'\r\n", []string{"PING", "SET|a|b c", "GET|x y"}, "")
	f("SET k \"\\x00\\xff\\t\\\"q\\\"\"\r\n", []string{"SET|k|\x00\xff\t\"q\""}, "")
	f("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$70000\r\n"+strings.Repeat("v", 70000)+"\r\n", []string{"SET|k|<70000 bytes>"}, "")
	f("*1\r\n$4\r\nPING", nil, "unexpected EOF")
	f("*1\r\n$4\r\nPIN", nil, "unexpected EOF")
	f("*2\r\n$1\r\na\r\n", nil, "EOF")
	f("*1\r\n$4\r\nPINGxx", nil, "Protocol error: bulk string not terminated by CRLF")
	f("*1\r\n$+4\r\nPING\r\n", nil, "Protocol error: invalid bulk length")
	f("*01\r\n", nil, "Protocol error: invalid multibulk length")
	f("*1\r\n$04\r\nPING\r\n", nil, "Protocol error: invalid bulk length")
	f("*1\r\n$536870913\r\n", nil, "Protocol error: invalid bulk length")
	f("*9223372036854775808\r\n", nil, "Protocol error: invalid multibulk length")
	f("*1\r\n*1\r\n", nil, "Protocol error: expected '$', got '*'")
	f("GET \"a\"b\r\n", nil, "Protocol error: unbalanced quotes in request")
}

// TestReaderBounds: declared sizes are only numbers until bytes arrive:
// neither a huge multibulk count nor a huge bulk length allocates.
func TestReaderBounds(t *testing.T) {
	in := []byte("*1048576\r\n$536870912\r\n")
	src := bytes.NewReader(in)
	r := newReader(src, testLimits)
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(in)
		r.br.Reset(src)
		if _, err := r.begin(); err != nil {
			t.Fatal(err)
		}
		if _, big, err := r.next(); err != nil || big != 512<<20 {
			t.Fatal(big, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations to parse absurd declared sizes", allocs)
	}
	// Many small arguments stop at maxRequest: the command is refused,
	// read through without growing the arena.
	var b strings.Builder
	b.WriteString("*100001\r\n$4\r\nMGET\r\n")
	for range 100000 {
		b.WriteString("$10\r\n0123456789\r\n")
	}
	r = newReader(strings.NewReader(b.String()), limits{maxArgs: 1 << 20, maxBulk: 1 << 20, maxRequest: 64 << 10})
	if _, err := r.begin(); err != nil {
		t.Fatal(err)
	}
	r.next()
	_, tooLong, err := r.rest()
	if err != nil || !tooLong {
		t.Errorf("rest: tooLong %v, err %v", tooLong, err)
	}
	if cap(r.arena) > 128<<10 {
		t.Errorf("arena grew to %d bytes", cap(r.arena))
	}
}

func TestParseInt(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "-1": -1, "42": 42, "9223372036854775807": 1<<63 - 1, "-9223372036854775808": -1 << 63} {
		if got, ok := parseInt([]byte(in)); !ok || got != want {
			t.Errorf("parseInt(%q) = %d, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "-", "+1", "01", "-0x", " 1", "1 ", "9223372036854775808", "-9223372036854775809", "1e3"} {
		if _, ok := parseInt([]byte(in)); ok {
			t.Errorf("parseInt(%q) accepted", in)
		}
	}
}

// FuzzReader: no input panics the parser or makes it hold more than its
// limits, and every failure is a protocol error or the input's end.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"*1\r\n$4\r\nPING\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$70000\r\n",
		"SET a \"b\\x41\" 'c\\'d'\r\nGET a\n",
		"*-1\r\n*0\r\n*1\r\n$0\r\n\r\n",
		"*2\r\n$3\r\nGET\r\n$99999999999\r\n",
		"*99999999999\r\n",
		"$4\r\nPING\r\n",
		"\"unterminated\r\n",
	} {
		f.Add([]byte(s))
	}
	lim := limits{maxArgs: 1 << 10, maxBulk: 1 << 20, maxRequest: 8 << 10}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := readAll(t, data, lim)
		var pe protoError
		if !errors.As(err, &pe) && err != io.EOF && err != io.ErrUnexpectedEOF {
			t.Fatalf("error %v (%T) is neither a protocol error nor the end of input", err, err)
		}
	})
}
