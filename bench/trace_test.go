package bench

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestReadTrace(t *testing.T) {
	in := `{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [7, 8]}

{"timestamp": 1500, "input_length": 512, "output_length": 0, "hash_ids": [7], "extra": true}
`
	var got []Request
	if err := ReadTrace(strings.NewReader(in), func(r Request) error {
		got = append(got, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("read %d requests, want 2", len(got))
	}
	if r := got[1]; r.Timestamp != 1500*time.Millisecond || r.InputLength != 512 || r.OutputLength != 0 || len(r.HashIDs) != 1 || r.HashIDs[0] != 7 {
		t.Fatalf("second request %+v", r)
	}
	stop := errors.New("stop")
	n := 0
	err := ReadTrace(strings.NewReader(in), func(Request) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("callback error: got %v after %d calls", err, n)
	}
}

func TestReadTraceErrors(t *testing.T) {
	const ok = `{"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}` + "\n"
	for _, tc := range []struct {
		name, in string
		line     int
		field    string
		msg      string
	}{
		{"not json", "nope\n", 1, "", "invalid character"},
		{"not an object", "[1]\n", 1, "", "cannot unmarshal"},
		{"missing timestamp", `{"input_length": 1, "output_length": 1, "hash_ids": [1]}`, 1, "timestamp", "missing"},
		{"missing input", `{"timestamp": 1, "output_length": 1, "hash_ids": [1]}`, 1, "input_length", "missing"},
		{"missing output", `{"timestamp": 1, "input_length": 1, "hash_ids": [1]}`, 1, "output_length", "missing"},
		{"missing ids", `{"timestamp": 1, "input_length": 1, "output_length": 1}`, 1, "hash_ids", "missing"},
		{"null ids", `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": null}`, 1, "hash_ids", "missing"},
		{"string timestamp", `{"timestamp": "1", "input_length": 1, "output_length": 1, "hash_ids": [1]}`, 1, "timestamp", "want int64"},
		{"fractional length", `{"timestamp": 1, "input_length": 1.5, "output_length": 1, "hash_ids": [1]}`, 1, "input_length", "want int64"},
		{"negative id", `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [-1]}`, 1, "hash_ids", "want uint64"},
		{"negative timestamp", `{"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": [1]}`, 1, "timestamp", "out of range"},
		{"zero input", `{"timestamp": 1, "input_length": 0, "output_length": 1, "hash_ids": []}`, 1, "input_length", "out of range"},
		{"negative output", `{"timestamp": 1, "input_length": 1, "output_length": -1, "hash_ids": [1]}`, 1, "output_length", "out of range"},
		{"too few ids", ok + `{"timestamp": 6, "input_length": 513, "output_length": 1, "hash_ids": [1]}`, 2, "hash_ids", "1 ids for 513 input tokens, want 2"},
		{"too many ids", `{"timestamp": 1, "input_length": 512, "output_length": 1, "hash_ids": [1, 2]}`, 1, "hash_ids", "want 1"},
		{"repeated id", `{"timestamp": 1, "input_length": 1500, "output_length": 1, "hash_ids": [1, 2, 1]}`, 1, "hash_ids", "repeats at index 2"},
		{"time goes back", ok + "\n" + `{"timestamp": 4, "input_length": 1, "output_length": 1, "hash_ids": [1]}`, 3, "timestamp", "before the previous"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ReadTrace(strings.NewReader(tc.in), func(Request) error { return nil })
			var te *TraceError
			if !errors.As(err, &te) {
				t.Fatalf("error %v is not a *TraceError", err)
			}
			if !errors.Is(err, ErrTrace) {
				t.Errorf("error %v does not wrap ErrTrace", err)
			}
			if te.Line != tc.line || te.Field != tc.field {
				t.Errorf("line %d field %q, want line %d field %q (%v)", te.Line, te.Field, tc.line, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			if want := fmt.Sprintf("line %d", tc.line); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		})
	}
}

func TestReadTraceLineTooLong(t *testing.T) {
	in := strings.Repeat(" ", maxTraceLine+1) + "\n"
	err := ReadTrace(strings.NewReader(in), func(Request) error { return nil })
	var te *TraceError
	if !errors.As(err, &te) || te.Line != 1 {
		t.Fatalf("got %v, want a *TraceError for line 1", err)
	}
}

func TestNewTraceChains(t *testing.T) {
	reqs := []Request{
		{InputLength: 1500, HashIDs: []uint64{10, 11, 12}},
		{InputLength: 1000, HashIDs: []uint64{10, 13}},
	}
	tr, err := NewTrace("t", reqs)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Blocks() != 4 || tr.Parent(0) != NoParent || tr.Parent(1) != 0 || tr.Parent(3) != 0 || tr.HashID(3) != 13 {
		t.Fatalf("dense ids or parents wrong: %+v", tr)
	}
	reqs = append(reqs, Request{InputLength: 600, HashIDs: []uint64{13, 14}})
	if _, err := NewTrace("t", reqs); !errors.Is(err, ErrTrace) || !strings.Contains(err.Error(), "request 3") {
		t.Fatalf("id 13 moved to a new parent: got %v, want ErrTrace naming request 3", err)
	}
}

func TestTraceName(t *testing.T) {
	for in, want := range map[string]string{
		"/x/conversation_trace.jsonl": "conversation",
		"synthetic.jsonl":             "synthetic",
		"odd.txt":                     "odd.txt",
		"_trace.jsonl":                "_trace",
	} {
		if got := TraceName(in); got != want {
			t.Errorf("TraceName(%q) = %q, want %q", in, got, want)
		}
	}
}
