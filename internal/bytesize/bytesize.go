// Package bytesize parses and prints byte counts the way operators write
// them: "4GiB", "512MiB", "64KiB", "1.5GB", "1048576".
package bytesize

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrSyntax reports an unparseable size.
var ErrSyntax = errors.New("bytesize: invalid size")

var units = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// Parse reads a non-negative byte count: a number (possibly fractional)
// followed by an optional unit. Binary units (KiB, MiB, GiB, TiB, and the
// shorthand K, M, G, T) are powers of 1024; KB, MB, GB, TB are powers of 1000.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	for _, u := range units {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || t == "" || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w %q: want a number with an optional unit, like 4GiB, 512MiB or 1048576", ErrSyntax, s)
	}
	n := v * mult
	if n > math.MaxInt64 {
		return 0, fmt.Errorf("%w %q: too large", ErrSyntax, s)
	}
	return int64(n), nil
}

// Format prints n with the largest binary unit that keeps it readable.
func Format(n int64) string {
	f := float64(n)
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if f >= u.mult {
			v := f / u.mult
			if v == math.Trunc(v) {
				return fmt.Sprintf("%d%s", int64(v), u.suffix)
			}
			return fmt.Sprintf("%.1f%s", v, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", n)
}
