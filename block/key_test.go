package block

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	valid := strings.Repeat("0123456789abcdef", 4)
	k, err := ParseKey(valid)
	if err != nil {
		t.Fatalf("ParseKey(valid): %v", err)
	}
	if got := k.String(); got != valid {
		t.Fatalf("round trip: got %s, want %s", got, valid)
	}
	if k[0] != 0x01 || k[31] != 0xef {
		t.Fatalf("decoded bytes wrong: % x", k)
	}

	f := func(in, wantMsg string) {
		t.Helper()
		_, err := ParseKey(in)
		if !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("ParseKey(%q) = %v, want ErrInvalidKey", in, err)
		}
		if !strings.Contains(err.Error(), wantMsg) {
			t.Fatalf("ParseKey(%q) error %q does not mention %q", in, err, wantMsg)
		}
	}
	f("", "got 0 characters, want 64")
	f(valid[:63], "got 63 characters")
	f(valid+"0", "got 65 characters")
	f(strings.ToUpper(valid), "uppercase hex 'A' at position 10")
	f("g"+valid[1:], "'g' at position 0 is not a hex digit")
	f(valid[:40]+" "+valid[41:], "' ' at position 40")
}

func TestKeyJSON(t *testing.T) {
	k := OpaqueKey("a/m", []byte("x"))
	b, err := json.Marshal(map[string]Key{"k": k})
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]Key
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back["k"] != k {
		t.Fatalf("JSON round trip: got %v, want %v", back["k"], k)
	}
	if err := json.Unmarshal([]byte(`{"k":"zz"}`), &back); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("bad JSON key: got %v, want ErrInvalidKey", err)
	}
}

func FuzzParseKey(f *testing.F) {
	f.Add(strings.Repeat("ab", 32))
	f.Add(strings.Repeat("AB", 32))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("error does not wrap ErrInvalidKey: %v", err)
			}
			return
		}
		if k.String() != s {
			t.Fatalf("accepted %q but it formats as %q", s, k.String())
		}
	})
}
