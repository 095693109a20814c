package scheduler

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// prefillUnit scales token counts before fitting: features like n^2 reach
// 10^10 for 128k-token prompts, and a common unit keeps the design matrix
// well conditioned.
const prefillUnit = 1e4

// PrefillModel estimates the execution time of a prefill: T(n, p) for a
// prompt of n tokens whose first p tokens are already cached. It is a
// second-degree polynomial in n and p,
//
//	T = c0 + c1 n + c2 p + c3 n^2 + c4 n p + c5 p^2  (n, p in units of 10^4 tokens)
//
// fitted by least squares to measurements. The paper's compute model,
// flops(n) - flops(p) with flops(n) = l (a n^2 d + b n d^2), lies in this
// space, so a profile generated from it is fitted exactly; a real engine's
// measurements add the constant and cross terms that kernels and launch
// overheads bring. A PrefillModel is immutable and safe for concurrent use.
type PrefillModel struct {
	coef [6]float64
}

func prefillFeatures(n, p float64) []float64 {
	u, v := n/prefillUnit, p/prefillUnit
	return []float64{1, u, v, u * u, u * v, v * v}
}

// Seconds returns the estimated prefill time in seconds; never negative.
func (m *PrefillModel) Seconds(n, p int) float64 {
	if p > n {
		p = n
	}
	f := prefillFeatures(float64(n), float64(p))
	var s float64
	for i, c := range m.coef {
		s += c * f[i]
	}
	return max(s, 0)
}

// Estimate returns Seconds as a duration.
func (m *PrefillModel) Estimate(n, p int) time.Duration { return seconds(m.Seconds(n, p)) }

// Coefficients returns c0..c5 (see PrefillModel).
func (m *PrefillModel) Coefficients() [6]float64 { return m.coef }

// FitPrefill fits a PrefillModel to samples.
func FitPrefill(samples []PrefillSample) (*PrefillModel, error) {
	X := make([][]float64, len(samples))
	y := make([]float64, len(samples))
	for i, s := range samples {
		X[i] = prefillFeatures(float64(s.InputLen), float64(s.PrefixLen))
		y[i] = s.Seconds
	}
	b, err := leastSquares(X, y)
	if err != nil {
		return nil, err
	}
	m := &PrefillModel{}
	copy(m.coef[:], b)
	return m, nil
}

// ParsePrefillProfile reads a profile CSV and fits a PrefillModel to it; see
// ReadPrefillProfile for the format.
func ParsePrefillProfile(r io.Reader) (*PrefillModel, error) {
	samples, err := ReadPrefillProfile(r)
	if err != nil {
		return nil, err
	}
	return FitPrefill(samples)
}

// PrefillSample is one measured prefill.
type PrefillSample struct {
	InputLen, PrefixLen int
	Seconds             float64
}

// maxProfileTokens bounds lengths in a profile: far past any context window,
// small enough that squares stay exact in float64.
const maxProfileTokens = 1 << 24

// ReadPrefillProfile reads prefill measurements as CSV with the header
// "input_len,prefix_len,seconds": one prefill per line, input_len >= 1,
// 0 <= prefix_len <= input_len, seconds >= 0. Blank lines and lines starting
// with '#' are ignored.
func ReadPrefillProfile(r io.Reader) ([]PrefillSample, error) {
	rows, err := readProfile(r, []string{"input_len", "prefix_len", "seconds"})
	if err != nil {
		return nil, err
	}
	out := make([]PrefillSample, 0, len(rows))
	for _, row := range rows {
		n, p := row.v[0], row.v[1]
		switch {
		case n < 1 || n > maxProfileTokens || n != math.Trunc(n):
			return nil, fmt.Errorf("%w: line %d: input_len %v is not a whole number in [1, %d]", ErrProfile, row.line, n, maxProfileTokens)
		case p < 0 || p > n || p != math.Trunc(p):
			return nil, fmt.Errorf("%w: line %d: prefix_len %v is not a whole number in [0, input_len]", ErrProfile, row.line, p)
		}
		out = append(out, PrefillSample{InputLen: int(n), PrefixLen: int(p), Seconds: row.v[2]})
	}
	return out, nil
}

// Paper model constants (FAST'25 Table 1): LLaMA3-70B on 8 x A800.
const (
	paperLayers = 80
	paperHidden = 8192
	paperA      = 4
	paperB      = 22
	// paperGPUFLOPS is 8 GPUs at 312 dense BF16 TFLOPS.
	paperGPUFLOPS = 8 * 312e12
)

// DefaultMFU is the model FLOPs utilization of the default prefill profile.
// 0.5 is what well-tuned long-prompt prefill reaches on A100/A800-class
// GPUs with tensor parallelism inside one node; short prompts reach less,
// which a measured profile captures and this one does not.
const DefaultMFU = 0.5

// PaperFLOPs is the paper's prefill compute for n tokens (equation 1):
// l*(a*n^2*d + b*n*d^2) with LLaMA3-70B's shape.
func PaperFLOPs(n int) float64 {
	x := float64(n)
	return paperLayers * (paperA*x*x*paperHidden + paperB*x*paperHidden*paperHidden)
}

// PaperPrefillSeconds is the paper model's prefill time on 8 x A800 at mfu:
// the FLOPs of the uncached part, flops(n) - flops(p), over the machine's
// throughput times mfu.
func PaperPrefillSeconds(n, p int, mfu float64) float64 {
	return (PaperFLOPs(n) - PaperFLOPs(p)) / (paperGPUFLOPS * mfu)
}

// WritePaperProfile writes a profile CSV generated from the paper's model
// at mfu: input lengths from 1k to 128k tokens, each with prefix hits of 0
// to 100% in eighths. The default profile (profiles/llama3-70b-8xa800.csv)
// is its output for DefaultMFU.
func WritePaperProfile(w io.Writer, mfu float64) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# LLaMA3-70B on 8 x A800 (312 TFLOPS each), generated from flops(n) = l*(a*n^2*d + b*n*d^2)\n")
	fmt.Fprintf(&b, "# with l=80, d=8192, a=4, b=22 at MFU %g; seconds = (flops(n) - flops(p)) / (8 * 312e12 * MFU)\n", mfu)
	b.WriteString("input_len,prefix_len,seconds\n")
	for _, n := range []int{1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072} {
		for eighth := 0; eighth <= 8; eighth++ {
			p := n * eighth / 8
			fmt.Fprintf(&b, "%d,%d,%.6g\n", n, p, PaperPrefillSeconds(n, p, mfu))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func seconds(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/1e9 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s * 1e9)
}
