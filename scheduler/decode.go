package scheduler

import (
	"fmt"
	"io"
	"math"
	"time"
)

// decodeKVUnit scales KV token counts before fitting (see prefillUnit).
const decodeKVUnit = 1e6

// DecodeModel estimates the time between tokens (one decode iteration) of a
// continuous batch from its size B (sequences) and the KV tokens K it
// attends over:
//
//	TBT = c0 + c1 B + c2 K  (K in units of 10^6 tokens)
//
// Decode is memory-bound: c0 is reading the weights once per iteration, c2
// reading the KV cache, c1 the per-sequence work (sampling, scheduling). It
// is fitted by least squares from measurements. Past an instance's KV
// capacity, an engine must swap or recompute, which Slowdown models. A
// DecodeModel is immutable and safe for concurrent use.
type DecodeModel struct {
	coef [3]float64
}

// Default decode model: LLaMA3-70B on 8 x A800 (2.0 TB/s HBM each).
const (
	// defaultDecodeBase: 140 GB of BF16 weights read at 8 x 2.0 TB/s with
	// about 45% achieved bandwidth is about 20 ms, all-reduces included.
	defaultDecodeBase = 0.020
	// defaultDecodePerSeq: sampling and per-sequence scheduling overhead.
	defaultDecodePerSeq = 0.00025
	// defaultDecodePerMTok: 320 KiB of KV per token read at 8 x 2.0 TB/s
	// with about 25% achieved bandwidth (decode attention over long,
	// ragged contexts) is about 80 ns per token, 80 ms per million.
	defaultDecodePerMTok = 0.080
)

// DefaultDecodeCapacity is the default KV capacity of a decode instance in
// tokens: 8 x 80 GB at 90% utilization, less 140 GB of weights and about
// 30 GB of activations, is about 406 GB, 1.2M tokens of 320 KiB.
const DefaultDecodeCapacity = 1_200_000

// DefaultDecodeModel returns the default decode model (see the constants).
func DefaultDecodeModel() *DecodeModel {
	return &DecodeModel{coef: [3]float64{defaultDecodeBase, defaultDecodePerSeq, defaultDecodePerMTok}}
}

// NewDecodeModel returns TBT = base + perSeq*B + perToken*K, all in seconds.
func NewDecodeModel(base, perSeq, perToken float64) *DecodeModel {
	return &DecodeModel{coef: [3]float64{base, perSeq, perToken * decodeKVUnit}}
}

// Seconds returns the estimated TBT in seconds of a batch of b sequences
// over kv tokens; 0 for an empty batch.
func (m *DecodeModel) Seconds(b int, kv int64) float64 {
	if b <= 0 {
		return 0
	}
	return max(m.coef[0]+m.coef[1]*float64(b)+m.coef[2]*float64(kv)/decodeKVUnit, 0)
}

// Estimate returns Seconds as a duration.
func (m *DecodeModel) Estimate(b int, kv int64) time.Duration { return seconds(m.Seconds(b, kv)) }

// Coefficients returns c0, c1 (per sequence) and c2 (per million KV tokens).
func (m *DecodeModel) Coefficients() [3]float64 { return m.coef }

// Slowdown is how much slower iterations get when kv tokens exceed an
// instance's capacity (0 means unbounded): an engine then swaps sequences
// out and back, so on average each runs capacity/kv of the time.
func Slowdown(kv, capacity int64) float64 {
	if capacity <= 0 || kv <= capacity {
		return 1
	}
	return float64(kv) / float64(capacity)
}

// DecodeSample is one measured decode iteration.
type DecodeSample struct {
	BatchSize int
	KVTokens  int64
	Seconds   float64
}

// FitDecode fits a DecodeModel to samples.
func FitDecode(samples []DecodeSample) (*DecodeModel, error) {
	X := make([][]float64, len(samples))
	y := make([]float64, len(samples))
	for i, s := range samples {
		X[i] = []float64{1, float64(s.BatchSize), float64(s.KVTokens) / decodeKVUnit}
		y[i] = s.Seconds
	}
	b, err := leastSquares(X, y)
	if err != nil {
		return nil, err
	}
	m := &DecodeModel{}
	copy(m.coef[:], b)
	return m, nil
}

// ReadDecodeProfile reads decode measurements as CSV with the header
// "batch_size,kv_tokens,seconds": one iteration time per line, batch_size
// >= 1. Blank lines and lines starting with '#' are ignored.
func ReadDecodeProfile(r io.Reader) ([]DecodeSample, error) {
	rows, err := readProfile(r, []string{"batch_size", "kv_tokens", "seconds"})
	if err != nil {
		return nil, err
	}
	out := make([]DecodeSample, 0, len(rows))
	for _, row := range rows {
		b, kv := row.v[0], row.v[1]
		switch {
		case b < 1 || b > 1<<20 || b != math.Trunc(b):
			return nil, fmt.Errorf("%w: line %d: batch_size %v is not a whole number in [1, 2^20]", ErrProfile, row.line, b)
		case kv > 1<<40 || kv != math.Trunc(kv):
			return nil, fmt.Errorf("%w: line %d: kv_tokens %v is not a whole number in [0, 2^40]", ErrProfile, row.line, kv)
		}
		out = append(out, DecodeSample{BatchSize: int(b), KVTokens: int64(kv), Seconds: row.v[2]})
	}
	return out, nil
}

// ParseDecodeProfile reads a decode profile CSV and fits a DecodeModel.
func ParseDecodeProfile(r io.Reader) (*DecodeModel, error) {
	samples, err := ReadDecodeProfile(r)
	if err != nil {
		return nil, err
	}
	return FitDecode(samples)
}
