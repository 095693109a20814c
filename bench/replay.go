package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Trace is a request trace prepared for replay. Hash ids are renumbered to
// dense block ids 0..Blocks()-1 once, so that caches in the simulator index
// slices instead of hashing, and each block knows its parent in the chain.
// A Trace is immutable and safe for concurrent use by many replays.
type Trace struct {
	// Name labels reports: the file name without "_trace.jsonl" or ".jsonl".
	Name string

	reqs   []traceReq
	ids    []int32  // every request's dense ids, concatenated in trace order
	parent []int32  // parent[id]: the block before id in its chain, or -1
	hash   []uint64 // hash[id]: the trace's own hash id
}

type traceReq struct {
	start, end   int32 // ids[start:end] are the request's blocks
	inputTokens  int64
	outputTokens int
	arrival      time.Duration
}

// NoParent is the parent of a chain's first block.
const NoParent int32 = -1

// NewTrace prepares requests for replay. Besides what ReadTrace checks, it
// checks the chains across requests: a hash id names a whole prefix, so it
// must follow the same parent every time it appears.
func NewTrace(name string, reqs []Request) (*Trace, error) {
	b := newTraceBuilder(name)
	for _, r := range reqs {
		if err := b.add(r); err != nil {
			return nil, err
		}
	}
	return b.t, nil
}

// OpenTrace streams a trace file into a Trace without keeping the requests.
func OpenTrace(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	b := newTraceBuilder(TraceName(path))
	if err := ReadTrace(f, b.add); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b.t, nil
}

// TraceName labels a trace file: "x/conversation_trace.jsonl" is "conversation".
func TraceName(path string) string {
	base := filepath.Base(path)
	for _, suffix := range []string{"_trace.jsonl", ".jsonl"} {
		if s, ok := strings.CutSuffix(base, suffix); ok && s != "" {
			return s
		}
	}
	return base
}

type traceBuilder struct {
	t     *Trace
	dense map[uint64]int32
}

func newTraceBuilder(name string) *traceBuilder {
	return &traceBuilder{t: &Trace{Name: name}, dense: make(map[uint64]int32)}
}

func (b *traceBuilder) add(r Request) error {
	t := b.t
	if len(t.ids)+len(r.HashIDs) > 1<<31-1 {
		return fmt.Errorf("%w: more than 2^31 block accesses", ErrTrace)
	}
	start := int32(len(t.ids))
	prev := NoParent
	for i, h := range r.HashIDs {
		id, ok := b.dense[h]
		if !ok {
			id = int32(len(t.hash))
			b.dense[h] = id
			t.hash = append(t.hash, h)
			t.parent = append(t.parent, prev)
		} else if t.parent[id] != prev {
			return fmt.Errorf("%w: request %d: hash id %d at index %d follows %s, but followed %s before; hash ids must name whole prefixes",
				ErrTrace, len(t.reqs)+1, h, i, b.describe(prev), b.describe(t.parent[id]))
		}
		t.ids = append(t.ids, id)
		prev = id
	}
	t.reqs = append(t.reqs, traceReq{start: start, end: int32(len(t.ids)), inputTokens: int64(r.InputLength), outputTokens: r.OutputLength, arrival: r.Timestamp})
	return nil
}

func (b *traceBuilder) describe(id int32) string {
	if id == NoParent {
		return "nothing (chain start)"
	}
	return fmt.Sprintf("hash id %d", b.t.hash[id])
}

// Requests returns the number of requests.
func (t *Trace) Requests() int { return len(t.reqs) }

// Blocks returns the number of distinct blocks; dense ids are below it.
func (t *Trace) Blocks() int { return len(t.hash) }

// Accesses returns the number of block accesses (all requests' blocks).
func (t *Trace) Accesses() int { return len(t.ids) }

// HashID returns the trace's hash id of a dense block id.
func (t *Trace) HashID(id int32) uint64 { return t.hash[id] }

// Access returns the block id of the pos-th access, requests in order
// (0 <= pos < Accesses()).
func (t *Trace) Access(pos int) int32 { return t.ids[pos] }

// Parent returns the block before id in its chain, or NoParent.
func (t *Trace) Parent(id int32) int32 { return t.parent[id] }

// Arrival returns request i's arrival time since the start of the trace.
func (t *Trace) Arrival(i int) time.Duration { return t.reqs[i].arrival }

// OutputTokens returns request i's output length.
func (t *Trace) OutputTokens(i int) int { return t.reqs[i].outputTokens }

// Request returns request i's dense block ids, first to last, and its input
// tokens. The slice belongs to the Trace and must not be modified.
func (t *Trace) Request(i int) (ids []int32, inputTokens int64) {
	r := t.reqs[i]
	return t.ids[r.start:r.end], r.inputTokens
}
