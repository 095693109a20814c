package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// TraceBlockTokens is the block size of the Mooncake traces: each hash id
// names 512 tokens together with every token before them.
const TraceBlockTokens = 512

// maxTraceLine bounds one trace line. The longest published request has a
// few hundred hash ids (a few KiB); 16 MiB leaves room for million-token
// prompts while still stopping a file with no newlines from eating memory.
const maxTraceLine = 16 << 20

// Request is one request of a Mooncake trace (FAST'25, Appendix A).
type Request struct {
	// Timestamp is the arrival time since the start of the trace (the file
	// stores milliseconds).
	Timestamp time.Duration
	// InputLength and OutputLength are prompt and generated tokens.
	InputLength, OutputLength int
	// HashIDs name the prompt's blocks of TraceBlockTokens tokens, first to
	// last; the last one may be partial. An id covers its block and the whole
	// prefix before it, so equal ids mean reusable KV cache.
	HashIDs []uint64
}

// TraceError describes an invalid trace line. It wraps ErrTrace and, where
// there is one, the decoding error.
type TraceError struct {
	Line  int    // 1-based line number
	Field string // JSON field at fault; empty when the line is not an object
	Err   error
}

func (e *TraceError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("bench: trace line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("bench: trace line %d: field %s: %v", e.Line, e.Field, e.Err)
}

// Unwrap makes errors.Is(err, ErrTrace) hold and exposes the cause.
func (e *TraceError) Unwrap() []error { return []error{ErrTrace, e.Err} }

// ReadTrace streams the requests of a JSONL trace to fn, in file order,
// validating each line; memory stays bounded by one line. Blank lines are
// skipped and unknown fields ignored. Every other departure from the format is
// a *TraceError: a missing or mistyped field, a negative length, a timestamp
// earlier than the previous line's, or hash_ids that are not exactly
// ceil(input_length/512) distinct ids. An error from fn stops the read and is
// returned as is. fn may keep the Request; its HashIDs are not reused.
func ReadTrace(r io.Reader, fn func(Request) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxTraceLine)
	var (
		line int
		prev time.Duration
	)
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		req, err := parseTraceLine(b, line)
		if err != nil {
			return err
		}
		if req.Timestamp < prev {
			return &TraceError{Line: line, Field: "timestamp", Err: fmt.Errorf("%d ms is before the previous request's %d ms", req.Timestamp.Milliseconds(), prev.Milliseconds())}
		}
		prev = req.Timestamp
		if err := fn(req); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &TraceError{Line: line + 1, Err: fmt.Errorf("line longer than %d bytes", maxTraceLine)}
		}
		return fmt.Errorf("bench: reading trace: %w", err)
	}
	return nil
}

// LoadTrace reads a whole trace file; see ReadTrace.
func LoadTrace(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	var reqs []Request
	err = ReadTrace(f, func(r Request) error {
		reqs = append(reqs, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return reqs, nil
}

// traceLine is the wire form; pointers tell a missing field from a zero.
type traceLine struct {
	Timestamp    *int64   `json:"timestamp"`
	InputLength  *int64   `json:"input_length"`
	OutputLength *int64   `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

// maxTraceMillis keeps a timestamp representable as a time.Duration.
const maxTraceMillis = int64(1<<63-1) / int64(time.Millisecond)

// parseTraceLine decodes and validates one non-blank line.
func parseTraceLine(b []byte, line int) (Request, error) {
	var tl traceLine
	if err := json.Unmarshal(b, &tl); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Request{}, &TraceError{Line: line, Field: te.Field, Err: fmt.Errorf("want %s, got JSON %s", te.Type, te.Value)}
		}
		return Request{}, &TraceError{Line: line, Err: err}
	}
	bad := func(field, format string, args ...any) (Request, error) {
		return Request{}, &TraceError{Line: line, Field: field, Err: fmt.Errorf(format, args...)}
	}
	switch {
	case tl.Timestamp == nil:
		return bad("timestamp", "missing")
	case tl.InputLength == nil:
		return bad("input_length", "missing")
	case tl.OutputLength == nil:
		return bad("output_length", "missing")
	case tl.HashIDs == nil:
		return bad("hash_ids", "missing")
	case *tl.Timestamp < 0 || *tl.Timestamp > maxTraceMillis:
		return bad("timestamp", "%d ms is out of range", *tl.Timestamp)
	case *tl.InputLength < 1 || *tl.InputLength > 1<<40:
		return bad("input_length", "%d is out of range [1, 2^40]", *tl.InputLength)
	case *tl.OutputLength < 0 || *tl.OutputLength > 1<<40:
		return bad("output_length", "%d is out of range [0, 2^40]", *tl.OutputLength)
	}
	n := *tl.InputLength
	if want := (n + TraceBlockTokens - 1) / TraceBlockTokens; int64(len(tl.HashIDs)) != want {
		return bad("hash_ids", "%d ids for %d input tokens, want %d (one per %d-token block)", len(tl.HashIDs), n, want, TraceBlockTokens)
	}
	// A prefix hash covers everything before it, so one chain cannot hold
	// the same id twice; a repeat means the ids are not prefix hashes.
	seen := make(map[uint64]struct{}, len(tl.HashIDs))
	for i, id := range tl.HashIDs {
		if _, dup := seen[id]; dup {
			return bad("hash_ids", "id %d repeats at index %d", id, i)
		}
		seen[id] = struct{}{}
	}
	return Request{
		Timestamp:    time.Duration(*tl.Timestamp) * time.Millisecond,
		InputLength:  int(n),
		OutputLength: int(*tl.OutputLength),
		HashIDs:      tl.HashIDs,
	}, nil
}
