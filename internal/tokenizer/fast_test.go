package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

// checkSame fails t when the cl100k encoder and tiktoken-go's disagree on
// text.
func checkSame(t *testing.T, tok *Tokenizer, text string) {
	t.Helper()
	want := tok.enc.EncodeOrdinary(text)
	got := tok.fast.appendEncode(nil, text)
	if len(got) != len(want) {
		t.Fatalf("%q: got %v, tiktoken-go %v", text, got, want)
	}
	for i := range got {
		if int(got[i]) != want[i] {
			t.Fatalf("%q: got %v, tiktoken-go %v", text, got, want)
		}
	}
}

var trickyTexts = []string{
	"", "a", " ", "  ", "\n", "\r\n", " \r\n ", "\r\n\r\n\n", "hello world",
	"  hello", "\thello", "\t\thello", "   \n  x", "a  \n\n  b", "x \t \r  ",
	"I'm you're we've they'll he'd it's don't", "I'M YOU'RE WE'VE THEY'LL HE'D IT'S DON'T",
	"'s'S'sam 're'Re'rE'r'l'll'LL'lL 'x '", "''''s", " 's", "'\n", "'", "'l", "'r",
	"1", "12", "123", "1234", "1234567", "3.14159", "x1y22z333w4444", "٣٤٥٦", "²³¹½Ⅻ",
	"!!", "!!!\n\n", " !!\r\n", "  !", "a!b", "!hello", "\n!", "...\n\nx",
	"é", "e\u0301", "naïve café", "\u0301\u0301abc", "a\u0301b", " \u0301", "日本語のテキスト",
	"Привет мир", "مرحبا بالعالم", "😀😀 x", "👍🏽", "\u00a0x", "x\u00a0\u00a0y", "\u2003\u2003",
	"\u3000日本", "\u200b\u200b", "\ufeffx", "\x85x", "a\u2028b", "\u000b\u000c",
	"\xff", "\xff\xfe hello", "a\xc3", "\xc3\xa9\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80", "'\xffs",
	"<|endoftext|>", "<|user|>\nhi\n", "func main() {\n\tfmt.Println(\"hi\")\n}\n",
	strings.Repeat("a", 300), strings.Repeat("é", 200), strings.Repeat("!", 100), strings.Repeat(" ", 100) + "x",
	strings.Repeat("\r\n", 50), strings.Repeat("9", 50),
}

func TestEncodeMatchesTiktoken(t *testing.T) {
	tok := newTok(t)
	for _, s := range trickyTexts {
		checkSame(t, tok, s)
	}
	// Every rune below 0x3000 alone, after a space and between letters.
	for r := rune(0); r < 0x3000; r++ {
		s := string(r)
		checkSame(t, tok, s+" "+s+"a"+s+"'"+s+"1"+s+"\n")
	}
}

// FuzzEncodeMatchesTiktoken checks the cl100k encoder against tiktoken-go
// on arbitrary strings, whole and through Encode's chunks.
func FuzzEncodeMatchesTiktoken(f *testing.F) {
	for _, s := range trickyTexts {
		f.Add(s)
	}
	tok := newTok(f)
	f.Fuzz(func(t *testing.T, s string) {
		checkSame(t, tok, s)
		got := tok.Encode(s)
		var want []uint32
		for rest := s; len(rest) > 0; {
			n := chunkLen(rest)
			for _, id := range tok.enc.EncodeOrdinary(rest[:n]) {
				want = append(want, uint32(id))
			}
			rest = rest[n:]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, tiktoken-go chunks %v", s, got, want)
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	tok := newTok(b)
	text := strings.Repeat("You are a careful assistant who answers in full sentences. ", 20) +
		"func main() {\n\tfmt.Println(\"hi\", 12345)\n}\n" + strings.Repeat("Привет мир, naïve café! ", 10)
	b.Run("yuebing", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			tok.fast.appendEncode(nil, text)
		}
	})
	b.Run("tiktoken-go", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			tok.enc.EncodeOrdinary(text)
		}
	})
}
