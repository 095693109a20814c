package bytesize

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	ok := func(in string, want int64) {
		t.Helper()
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	ok("0", 0)
	ok("1048576", 1<<20)
	ok("64KiB", 64<<10)
	ok("4GiB", 4<<30)
	ok("4 GiB", 4<<30)
	ok("1.5GiB", 3<<29)
	ok("2GB", 2e9)
	ok("16M", 16<<20)
	ok("100B", 100)
	for _, bad := range []string{"", "GiB", "-1MiB", "4XB", "four", "NaN", "1e400"} {
		if _, err := Parse(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, want ErrSyntax", bad, err)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 100: "100B", 64 << 10: "64KiB", 3 << 29: "1.5GiB", 4 << 30: "4GiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"4GiB", "1.5 MB", "", "1e3K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err == nil && n < 0 {
			t.Fatalf("Parse(%q) = %d", s, n)
		}
	})
}

func TestSizeText(t *testing.T) {
	f := func(in string, want Size, printed string) {
		t.Helper()
		var s Size
		if err := s.UnmarshalText([]byte(in)); err != nil || s != want {
			t.Fatalf("UnmarshalText(%q) = %d, %v; want %d", in, s, err, want)
		}
		b, err := s.MarshalText()
		if err != nil || string(b) != printed {
			t.Fatalf("MarshalText(%d) = %q, %v; want %q", s, b, err, printed)
		}
		var back Size
		if err := back.Set(string(b)); err != nil || back != s {
			t.Fatalf("Set(%q) = %d, %v; want %d", b, back, err, s)
		}
	}
	f("4GiB", 4<<30, "4GiB")
	f("1.5GiB", 3<<29, "1.5GiB")
	f("1025", 1025, "1025")
	f("1000", 1000, "1000B")
	f("0", 0, "0B")
	var s Size
	if err := s.UnmarshalText([]byte("4 parsecs")); !errors.Is(err, ErrSyntax) {
		t.Fatalf("UnmarshalText(4 parsecs) = %v; want ErrSyntax", err)
	}
	if s.Type() != "size" {
		t.Fatalf("Type() = %q", s.Type())
	}
}
