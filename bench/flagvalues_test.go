package bench

import (
	"strings"
	"testing"
)

func TestParseTokenCount(t *testing.T) {
	f := func(in string, want int64, ok bool) {
		t.Helper()
		got, err := ParseTokenCount(in)
		if (err == nil) != ok || (ok && got != want) {
			t.Errorf("ParseTokenCount(%q) = %d, %v; want %d, ok=%v", in, got, err, want, ok)
		}
	}
	f("3M", 3_000_000, true)
	f("512K", 512_000, true)
	f("512k", 512_000, true)
	f("1.5G", 1_500_000_000, true)
	f("4096", 4096, true)
	f(" 10m ", 10_000_000, true)
	f("", 0, false)
	f("M", 0, false)
	f("-1", 0, false)
	f("-1M", 0, false)
	f("3T", 0, false)
	f("NaNM", 0, false)
	f("1e30", 0, false)
}

// TestParseSize checks that the bench flags read sizes as the serve flags
// do: binary K/M/G, so "1M" is 1 MiB here but a million tokens to
// ParseTokenCount.
func TestParseSize(t *testing.T) {
	f := func(in string, want int64, ok bool) {
		t.Helper()
		got, err := ParseSize(in)
		if (err == nil) != ok || (ok && got != want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok=%v", in, got, err, want, ok)
		}
	}
	f("4096", 4096, true)
	f("64KiB", 64<<10, true)
	f("1M", 1<<20, true)
	f("2GB", 2e9, true)
	f("", 0, false)
	f("-1MiB", 0, false)
	f("4 lots", 0, false)
}

func TestParseSizes(t *testing.T) {
	var a, b, c int64 = -1, -1, -1
	errs := ParseSizes(
		SizeFlag{Name: "a", Text: "2KiB", Set: func(n int64) { a = n }},
		SizeFlag{Name: "b", Text: "lots", Set: func(n int64) { b = n }},
		SizeFlag{Name: "c", Text: "", Set: func(n int64) { c = n }, Optional: true},
		SizeFlag{Name: "d", Text: "", Set: func(int64) {}},
	)
	if a != 2048 || b != -1 || c != -1 {
		t.Fatalf("set a=%d b=%d c=%d, want 2048 -1 -1", a, b, c)
	}
	if len(errs) != 2 || !strings.HasPrefix(errs[0].Error(), "--b: ") || !strings.HasPrefix(errs[1].Error(), "--d: ") {
		t.Fatalf("errors %v, want one naming --b and one naming --d", errs)
	}
}
