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

// Size is a byte count written as operators write it: "4GiB", "512MiB",
// "1048576". It is a YAML or JSON scalar (encoding.TextMarshaler and
// TextUnmarshaler) and a command-line flag (pflag.Value), so an Options
// struct can declare a size once for every way it is set.
type Size int64

// String prints s with the largest binary unit that keeps it readable.
func (s Size) String() string { return Format(int64(s)) }

// MarshalText implements encoding.TextMarshaler. It prints the short form
// only when that reads back exactly, so a printed config loads unchanged.
func (s Size) MarshalText() ([]byte, error) {
	if f := s.String(); mustParse(f) == int64(s) {
		return []byte(f), nil
	}
	return []byte(strconv.FormatInt(int64(s), 10)), nil
}

func mustParse(s string) int64 {
	n, err := Parse(s)
	if err != nil {
		return -1
	}
	return n
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Size) UnmarshalText(b []byte) error {
	n, err := Parse(string(b))
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

// Set makes a *Size a command-line flag (pflag.Value).
func (s *Size) Set(v string) error { return s.UnmarshalText([]byte(v)) }

// Type names the flag's value in help.
func (s *Size) Type() string { return "size" }
