package block

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseTokens(t *testing.T) {
	ok := func(in string, want ...uint32) {
		t.Helper()
		got, err := ParseTokens(strings.NewReader(in))
		if err != nil {
			t.Fatalf("ParseTokens(%q): %v", in, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ParseTokens(%q) = %v, want %v", in, got, want)
		}
	}
	ok("")
	ok("  \n\t ")
	ok("1 2 3", 1, 2, 3)
	ok("1,2,3", 1, 2, 3)
	ok("1, 2,\n3\r\n", 1, 2, 3)
	ok("1,2,", 1, 2)
	ok("0 4294967295", 0, 4294967295)
	ok("007", 7)

	bad := func(in string, wantIndex int, wantMsg string) {
		t.Helper()
		_, err := ParseTokens(strings.NewReader(in))
		var te *TokenError
		if !errors.As(err, &te) || !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("ParseTokens(%q) = %v, want a *TokenError", in, err)
		}
		if te.Index != wantIndex || !strings.Contains(err.Error(), wantMsg) {
			t.Fatalf("ParseTokens(%q) = %v (index %d), want index %d and %q", in, err, te.Index, wantIndex, wantMsg)
		}
	}
	bad("1 2 abc 4", 3, `"abc" at byte 4: not a non-negative integer`)
	bad("1 -2", 2, `"-2"`)
	bad("+5", 1, "a sign is not allowed")
	bad("1 4294967296", 2, "out of range")
	bad("1 99999999999999999999999999999999999999", 2, "out of range")
	bad("1 2x", 2, `"2x"`)
	bad("1,,2", 2, "empty token before this comma")
	bad(",1", 1, "empty token")
	bad("1 3.5", 2, `"3.5"`)
	bad("1 "+strings.Repeat("z", 100), 2, `...`)
}

func TestParseTokensReadError(t *testing.T) {
	_, err := ParseTokens(iotest.ErrReader(errors.New("disk on fire")))
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("got %v, want the reader's error", err)
	}
}

func FuzzParseTokens(f *testing.F) {
	f.Add("1 2 3")
	f.Add("1,2,,3")
	f.Add("4294967295, 0\n")
	f.Add("-1")
	f.Fuzz(func(t *testing.T, s string) {
		toks, err := ParseTokens(strings.NewReader(s))
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("error does not wrap ErrInvalidToken: %v", err)
			}
			return
		}
		// Whatever parses must survive a format/parse round trip.
		again, err := ParseTokens(strings.NewReader(FormatTokens(toks)))
		if err != nil || !slices.Equal(toks, again) {
			t.Fatalf("round trip of %v: got %v, %v", toks, again, err)
		}
	})
}
