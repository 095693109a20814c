package resp

import (
	"bytes"
	"testing"
	"time"
)

func TestMatch(t *testing.T) {
	f := func(p, s string, want bool) {
		t.Helper()
		if got := match([]byte(p), []byte(s)); got != want {
			t.Errorf("match(%q, %q) = %v, want %v", p, s, got, want)
		}
	}
	f("*", "", true)
	f("*", "anything", true)
	f("", "", true)
	f("", "a", false)
	f("h?llo", "hello", true)
	f("h?llo", "hllo", false)
	f("h*llo", "heeeello", true)
	f("h[ae]llo", "hallo", true)
	f("h[ae]llo", "hillo", false)
	f("h[^e]llo", "hallo", true)
	f("h[^e]llo", "hello", false)
	f("h[a-b]llo", "hbllo", true)
	f("h[b-a]llo", "hbllo", true) // a reversed range, as Redis
	f("h[a-b]llo", "hcllo", false)
	f("h\\*llo", "h*llo", true)
	f("h\\*llo", "hello", false)
	f("[\\]]", "]", true)
	f("vllm@*@0@*metadata", "vllm@model@1@0@abcmetadata", true)
	f("vllm@*@0@*metadata", "vllm@model@1@0@abckv_bytes", false)
	f("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false)
	f("a*", "ab", true)
	f("*b", "ab", true)
	f("a**b", "ab", true)
	f("[abc", "a", true) // an unterminated class ends with the pattern
}

// FuzzMatch: any pattern runs in time proportional to its length times the
// subject's, and a pattern without special bytes matches only itself.
func FuzzMatch(f *testing.F) {
	f.Add([]byte("h[^e]llo*"), []byte("hallo world"))
	f.Add([]byte("*a*a*a*a*a*b"), bytes.Repeat([]byte("a"), 200))
	f.Add([]byte("[\\"), []byte("["))
	f.Fuzz(func(t *testing.T, p, s []byte) {
		if len(p) > 256 || len(s) > 1024 {
			return
		}
		start := time.Now()
		m := match(p, s)
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Fatalf("match took %v", d)
		}
		if !bytes.ContainsAny(p, "*?[\\") && m != bytes.Equal(p, s) {
			t.Fatalf("literal pattern %q against %q: %v", p, s, m)
		}
		if !match([]byte("*"), s) {
			t.Fatal("* does not match")
		}
	})
}
