package router

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParsePrompt(t *testing.T) {
	tok, err := NewTokenizer("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	hello := tok.Encode("hello world")
	if len(hello) != 2 {
		t.Fatalf("cl100k_base encodes %q as %v, want two tokens", "hello world", hello)
	}
	f := func(kind Kind, body string, want Prompt) {
		t.Helper()
		got, err := ParsePrompt(kind, []byte(body), tok, PromptLimits{MaxTokens: 1000, MaxTextBytes: 64})
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if got.Model != want.Model || got.MaxTokens != want.MaxTokens || got.Stream != want.Stream || !slices.Equal(got.Tokens, want.Tokens) {
			t.Fatalf("%s: got %+v, want %+v", body, got, want)
		}
	}
	f(Completions, `{"model":"m","prompt":"hello world"}`, Prompt{Model: "m", Tokens: hello})
	f(Completions, `{"prompt":"hello world"}`, Prompt{Tokens: hello}) // the served model
	f(Completions, `{"model":"m","prompt":["hello world"],"max_tokens":5,"stream":true}`, Prompt{Model: "m", Tokens: hello, MaxTokens: 5, Stream: true})
	f(Completions, `{"model":"m","prompt":[1,2,3],"temperature":0.5}`, Prompt{Model: "m", Tokens: []uint32{1, 2, 3}})
	f(Completions, `{"model":"m","prompt":[[4294967295]]}`, Prompt{Model: "m", Tokens: []uint32{4294967295}})
	// Each message encoded apart, then the assistant's turn opened.
	chat := append(append(tok.Encode("<|system|>\nbe brief\n"), tok.Encode("<|user|>\nhello world\n")...), tok.Encode("<|assistant|>\n")...)
	f(ChatCompletions, `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hello world"}]}],"max_completion_tokens":9}`,
		Prompt{Model: "m", Tokens: chat, MaxTokens: 9})

	bad := func(kind Kind, body string) {
		t.Helper()
		if _, err := ParsePrompt(kind, []byte(body), tok, PromptLimits{MaxTokens: 4, MaxTextBytes: 64}); !errors.Is(err, ErrBadRequest) {
			t.Fatalf("%s: got %v, want ErrBadRequest", body, err)
		}
	}
	bad(Completions, `{"model":"m","prompt":""}`)
	bad(Completions, `{"model":"m","prompt":[]}`)
	bad(Completions, `{"model":"m","prompt":[1.5]}`)
	bad(Completions, `{"model":"m","prompt":[4294967296]}`)
	bad(Completions, `{"model":"m","prompt":[1,2,3,4,5]}`)
	bad(Completions, `{"model":"m","prompt":{"a":1}}`)
	bad(Completions, `{"model":"m","prompt":"hi","max_tokens":-1}`)
	bad(Completions, `{"model":"m","prompt":"hi"} {}`)
	bad(Completions, `{"\`) // goccy/go-json panicked on it
	bad(ChatCompletions, `{"\`)
	bad(ChatCompletions, `{"model":"m","messages":[]}`)
	bad(ChatCompletions, `{"model":"m","messages":[{"role":"","content":"x"}]}`)
	bad(ChatCompletions, `{"model":"m","messages":[{"role":"user","content":7}]}`)
	// Text past MaxTextBytes is refused before it is tokenized, one word
	// or many, however few tokens it would be.
	bad(Completions, `{"model":"m","prompt":"`+strings.Repeat("a", 65)+`"}`)
	bad(Completions, `{"model":"m","prompt":["`+strings.Repeat("a", 65)+`"]}`)
	bad(ChatCompletions, `{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("a", 60)+`"}]}`)
}

func FuzzParsePrompt(f *testing.F) {
	tok, err := NewTokenizer("cl100k_base")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(1), []byte(`{"model":"m","prompt":"hello world","max_tokens":5,"stream":true}`))
	f.Add(uint8(1), []byte(`{"model":"m","prompt":[[1,2,3]]}`))
	f.Add(uint8(2), []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`))
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		k := Completions
		if kind%2 == 0 {
			k = ChatCompletions
		}
		p, err := ParsePrompt(k, body, tok, PromptLimits{MaxTokens: 4096, MaxTextBytes: 1 << 16})
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v is not ErrBadRequest", err)
			}
			return
		}
		// No model is the served one, as vLLM takes it.
		if len(p.Tokens) == 0 || len(p.Tokens) > 4096 || p.MaxTokens < 0 {
			t.Fatalf("accepted %+v", p)
		}
	})
}

func TestTokenArray(t *testing.T) {
	f := func(in string, want []uint32, ok bool) {
		t.Helper()
		got, gotOK := tokenArray([]byte(in))
		if gotOK != ok || !slices.Equal(got, want) {
			t.Fatalf("%s: got %v %v, want %v %v", in, got, gotOK, want, ok)
		}
	}
	f(`[1,2,3]`, []uint32{1, 2, 3}, true)
	f("[ 0 ,\n4294967295\t]", []uint32{0, 4294967295}, true)
	for _, bad := range []string{`[]`, `[ ]`, `[4294967296]`, `[1,]`, `[,1]`, `[01]`, `[1.0]`, `[-1]`, `[1 2]`, `["1"]`, `1`, `[1`} {
		f(bad, nil, false)
	}
}

// FuzzTokenArray checks the fast token-array parser against encoding/json.
func FuzzTokenArray(f *testing.F) {
	f.Add([]byte(`[1, 2, 3]`))
	f.Add([]byte("[4294967295,\n0]"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := tokenArray(raw)
		if !ok {
			return
		}
		var want []uint32
		if err := json.Unmarshal(raw, &want); err != nil || !slices.Equal(got, want) {
			t.Fatalf("%q: fast %v, encoding/json %v (%v)", raw, got, want, err)
		}
	})
}
