package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/yuebing/yuebing/internal/bytesize"
)

// ParseSize reads a byte count as the bench flags take it, the way the
// serve flags and the config file do ("4GiB", "512MiB", "1048576"): K, M,
// G and KiB, MiB, GiB are powers of 1024, KB, MB, GB powers of 1000. A
// token count is not a size: see ParseTokenCount.
func ParseSize(s string) (int64, error) { return bytesize.Parse(s) }

// SizeFlag is a byte-size flag: its name, its text as given, and where
// its value goes. An Optional flag left empty is not set.
type SizeFlag struct {
	Name, Text string
	Set        func(int64)
	Optional   bool
}

// ParseSizes reads every flag as ParseSize does and sets those that read,
// returning an error for each that does not, naming its flag, so a
// harness reports every bad size at once.
func ParseSizes(flags ...SizeFlag) []error {
	var errs []error
	for _, f := range flags {
		if f.Optional && f.Text == "" {
			continue
		}
		n, err := ParseSize(f.Text)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", f.Name, err))
			continue
		}
		f.Set(n)
	}
	return errs
}

// ParseTokenCount reads a token count as the bench flags take it: a whole
// number with an optional decimal suffix K, M or G ("3M" is 3,000,000
// tokens, as the paper counts), or a fractional one ("1.5M").
func ParseTokenCount(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := 1.0
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			mult = 1e3
		case 'm', 'M':
			mult = 1e6
		case 'g', 'G':
			mult = 1e9
		}
		if mult != 1 {
			s = s[:len(s)-1]
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && mult == 1 {
		if n < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f*mult >= 1<<62 || f != f {
		return 0, fmt.Errorf("%q is not a token count like 3000000, 512K, 3M or 1.5G", s)
	}
	return int64(f * mult), nil
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
