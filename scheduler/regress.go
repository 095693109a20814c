package scheduler

import (
	"fmt"
	"math"
)

// leastSquares solves min |X b - y| for b with Householder QR, which stays
// accurate where the normal equations would square the condition number
// (profile features like n^2 span eight orders of magnitude). X has one row
// per sample and len(X[0]) columns; it is overwritten. It fails when X does
// not have full column rank, e.g. when every sample has the same input length.
func leastSquares(X [][]float64, y []float64) ([]float64, error) {
	m := len(X)
	if m == 0 {
		return nil, fmt.Errorf("%w: no samples", ErrProfile)
	}
	k := len(X[0])
	if m < k {
		return nil, fmt.Errorf("%w: %d samples for %d coefficients; need at least as many samples", ErrProfile, m, k)
	}
	y = append([]float64(nil), y...)
	// Column scale, so the rank test below is relative per column.
	for j := 0; j < k; j++ {
		var norm float64
		for i := 0; i < m; i++ {
			norm = math.Hypot(norm, X[i][j])
		}
		if norm == 0 {
			return nil, fmt.Errorf("%w: feature %d is zero in every sample; vary input and prefix lengths", ErrProfile, j)
		}
	}
	diag := make([]float64, k)
	for j := 0; j < k; j++ {
		var colNorm, scale float64
		for i := j; i < m; i++ {
			colNorm = math.Hypot(colNorm, X[i][j])
		}
		for i := 0; i < m; i++ {
			scale = math.Hypot(scale, X[i][j])
		}
		// A column that is (numerically) a combination of the earlier
		// ones leaves almost nothing below the diagonal.
		if colNorm <= 1e-10*scale {
			return nil, fmt.Errorf("%w: samples do not determine coefficient %d; vary input and prefix lengths independently", ErrProfile, j)
		}
		if X[j][j] > 0 {
			colNorm = -colNorm
		}
		for i := j; i < m; i++ {
			X[i][j] /= -colNorm
		}
		X[j][j]++
		for c := j + 1; c < k; c++ {
			var s float64
			for i := j; i < m; i++ {
				s += X[i][j] * X[i][c]
			}
			s = -s / X[j][j]
			for i := j; i < m; i++ {
				X[i][c] += s * X[i][j]
			}
		}
		var s float64
		for i := j; i < m; i++ {
			s += X[i][j] * y[i]
		}
		s = -s / X[j][j]
		for i := j; i < m; i++ {
			y[i] += s * X[i][j]
		}
		diag[j] = colNorm
	}
	b := make([]float64, k)
	for j := k - 1; j >= 0; j-- {
		s := y[j]
		for c := j + 1; c < k; c++ {
			s -= X[j][c] * b[c]
		}
		b[j] = s / diag[j]
	}
	return b, nil
}
