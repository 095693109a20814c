package router

import (
	"fmt"
	"strings"
	"testing"
)

var promptSink Prompt

// BenchmarkParsePrompt reads the request bodies of the router's request
// path: a completion of 2,048 token ids (BenchmarkPlaceWithEvents's
// prompt) and a chat of eight 1 KiB turns, tokenizing included.
func BenchmarkParsePrompt(b *testing.B) {
	tok, err := NewTokenizer("cl100k_base")
	if err != nil {
		b.Fatal(err)
	}
	var ids strings.Builder
	for i := range 2048 {
		if i > 0 {
			ids.WriteByte(',')
		}
		fmt.Fprintf(&ids, "%d", (i*7919)%100000)
	}
	var turns strings.Builder
	for i := range 8 {
		if i > 0 {
			turns.WriteByte(',')
		}
		fmt.Fprintf(&turns, `{"role":"user","content":%q}`, strings.Repeat(fmt.Sprintf("turn %d of a chat that shares its prefix. ", i), 24))
	}
	lim := PromptLimits{MaxTokens: 1 << 16, MaxTextBytes: 1 << 20}
	for _, c := range []struct {
		name string
		kind Kind
		body string
	}{
		{"completion-2048-ids", Completions, `{"model":"m","prompt":[` + ids.String() + `],"max_tokens":16,"temperature":0.5}`},
		{"chat-8-turns", ChatCompletions, `{"model":"m","messages":[` + turns.String() + `],"max_completion_tokens":16,"stream":true}`},
	} {
		body := []byte(c.body)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				p, err := ParsePrompt(c.kind, body, tok, lim)
				if err != nil {
					b.Fatal(err)
				}
				promptSink = p
			}
		})
	}
}
