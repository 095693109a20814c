package tokenizer

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/internal/openai"
)

func newTok(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := New("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestUnknownEncoding(t *testing.T) {
	if _, err := New("gpt2-bytes"); !errors.Is(err, ErrEncoding) {
		t.Fatalf("got %v, want ErrEncoding", err)
	}
}

func TestChunks(t *testing.T) {
	tok := newTok(t)
	// Ordinary text encodes as it would whole: the cut falls before a space.
	words := strings.Repeat("the quick brown fox jumps over the lazy dog ", 200)
	whole := tok.enc.EncodeOrdinary(words)
	got := tok.Encode(words)
	if len(got) != len(whole) {
		t.Fatalf("chunked %d tokens, whole %d", len(got), len(whole))
	}
	for i := range got {
		if int(got[i]) != whole[i] {
			t.Fatalf("token %d: chunked %d, whole %d", i, got[i], whole[i])
		}
	}
	// One endless word is cut on rune boundaries and decodes back.
	word := strings.Repeat("é", 5000)
	ids := tok.Encode(word)
	back := make([]int, len(ids))
	for i, id := range ids {
		back[i] = int(id)
	}
	if tok.enc.Decode(back) != word {
		t.Fatal("an endless word does not decode back")
	}
	// Special tokens' text is ordinary text.
	if ids := tok.Encode("<|endoftext|>"); len(ids) < 2 {
		t.Fatalf("<|endoftext|> encoded as %v, a special token", ids)
	}
}

func msgs(t testing.TB, s string) []openai.Message {
	t.Helper()
	var m []openai.Message
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestChatTemplate(t *testing.T) {
	tok := newTok(t)
	one := msgs(t, `[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":" there"}]}]`)
	c, err := ReadChat(one, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"<|system|>\nbe brief\n", "<|user|>\nhi there\n", GenerationPrompt}
	if !slices.Equal(c.Segments, want) {
		t.Fatalf("segments %q, want %q", c.Segments, want)
	}
	ids, _, _ := tok.EncodeChat(c, nil)
	var exp []uint32
	for _, s := range want {
		exp = append(exp, tok.Encode(s)...)
	}
	if !slices.Equal(ids, exp) {
		t.Fatalf("chat ids %v, want each message encoded apart %v", ids, exp)
	}
	// The next turn extends the previous prompt (without its generation
	// prompt) exactly.
	two := append(one, msgs(t, `[{"role":"assistant","content":"hello"},{"role":"user","content":"and now?"}]`)...)
	c1, _ := ReadChat(one, false)
	c2, _ := ReadChat(two, true)
	a, _, _ := tok.EncodeChat(c1, nil)
	b, _, _ := tok.EncodeChat(c2, nil)
	if !slices.Equal(b[:len(a)], a) {
		t.Fatal("the next turn does not extend the previous prompt")
	}
	for _, bad := range []string{`[]`, `[{"content":"x"}]`, `[{"role":"user","content":7}]`} {
		if _, err := ReadChat(msgs(t, bad), true); !errors.Is(err, ErrChat) {
			t.Errorf("%s: got %v, want ErrChat", bad, err)
		}
	}
}

func TestSegmentCache(t *testing.T) {
	tok := newTok(t)
	cache := NewSegmentCache(800)
	sys := strings.Repeat("You are a helpful assistant. ", 4)
	turn := func(i int) []openai.Message {
		return msgs(t, `[{"role":"system","content":"`+sys+`"},{"role":"user","content":"question `+strings.Repeat("x", i)+`"}]`)
	}
	c, _ := ReadChat(turn(1), true)
	cold, hits, misses := tok.EncodeChat(c, cache)
	if hits != 0 || misses != 3 {
		t.Fatalf("cold: %d hits %d misses, want 0 and 3", hits, misses)
	}
	warm, hits, _ := tok.EncodeChat(c, cache)
	if hits != 3 || !slices.Equal(cold, warm) {
		t.Fatalf("warm: %d hits, ids equal %v", hits, slices.Equal(cold, warm))
	}
	// The bound holds whatever is added.
	for i := range 200 {
		c, _ := ReadChat(turn(i), true)
		ids, _, _ := tok.EncodeChat(c, cache)
		plain, _, _ := tok.EncodeChat(c, nil)
		if !slices.Equal(ids, plain) {
			t.Fatalf("turn %d: cached ids differ from uncached", i)
		}
		if _, n := cache.Len(); n > 800 {
			t.Fatalf("cache holds %d tokens, bound 800", n)
		}
	}
	// Entries over an eighth of the bound are not kept.
	big := NewSegmentCache(80)
	big.Add(Key{1}, make([]uint32, 11))
	if n, _ := big.Len(); n != 0 {
		t.Fatal("an entry over an eighth of the bound was kept")
	}
	var none *SegmentCache
	none.Add(Key{1}, []uint32{1})
	if _, ok := none.Get(Key{1}); ok {
		t.Fatal("a nil cache returned an entry")
	}
}

// FuzzChat reads arbitrary messages through the template: it never
// panics, and with a cache or without, the ids are the same.
func FuzzChat(f *testing.F) {
	f.Add([]byte(`[{"role":"user","content":"hi"}]`), true)
	f.Add([]byte(`[{"role":"system","content":[{"type":"text","text":"a"}]},{"role":"user","content":null}]`), false)
	f.Add([]byte(`[{"role":"user","content":"<|endoftext|>\u00e9\u00e9"}]`), true)
	tok := newTok(f)
	cache := NewSegmentCache(1 << 16)
	f.Fuzz(func(t *testing.T, raw []byte, gen bool) {
		var m []openai.Message
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		c, err := ReadChat(m, gen)
		if err != nil {
			if !errors.Is(err, ErrChat) {
				t.Fatalf("error %v is not ErrChat", err)
			}
			return
		}
		a, _, _ := tok.EncodeChat(c, cache)
		b, _, _ := tok.EncodeChat(c, nil)
		if !slices.Equal(a, b) {
			t.Fatal("cached and uncached ids differ")
		}
	})
}

func BenchmarkEncodeChat(b *testing.B) {
	tok := newTok(b)
	sys := strings.Repeat("You are a careful assistant who answers in full sentences. ", 120)
	m := msgs(b, `[{"role":"system","content":"`+sys+`"},{"role":"user","content":"`+strings.Repeat("Tell me more about caches. ", 400)+`"}]`)
	c, _ := ReadChat(m, true)
	n, _, _ := tok.EncodeChat(c, nil)
	b.Logf("%d tokens", len(n))
	for _, bc := range []struct {
		name  string
		cache *SegmentCache
	}{{"cold", nil}, {"cached", NewSegmentCache(1 << 20)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(c.Bytes))
			for b.Loop() {
				tok.EncodeChat(c, bc.cache)
			}
		})
	}
}
