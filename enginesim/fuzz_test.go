package enginesim

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/yuebing/yuebing/internal/tokenizer"
)

// FuzzParseCompletion feeds arbitrary bodies to the completion and chat
// decoders: they return a request or an ErrInvalid, never panic, and a
// prompt accepted is token ids that survive a round trip.
func FuzzParseCompletion(f *testing.F) {
	for _, s := range []string{
		`{"prompt":[1,2,3],"max_tokens":4}`, `{"prompt":[[7,8]]}`, `{"prompt":"hi","stream":true}`,
		`{"prompt":[-1]}`, `{"prompt":[4294967296]}`, `{"prompt":{}}`, `{"n":2}`, `[]`, `null`, ``,
		`{"prompt":["hi"]}`, `{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, `{"messages":[{"content":"x"}]}`,
	} {
		f.Add([]byte(s))
	}
	tok, err := tokenizer.New("cl100k_base")
	if err != nil {
		f.Fatal(err)
	}
	e := &Engine{tok: tok, chats: tokenizer.NewSegmentCache(1 << 16), opts: Options{MaxPromptBytes: 1 << 16}}
	f.Fuzz(func(t *testing.T, body []byte) {
		if req, err := parseCompletion(body, true); err == nil {
			if _, err := e.chatPrompt(req.Messages, true); err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("chat: error %v is not ErrInvalid", err)
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatalf("chat: error %v is not ErrInvalid", err)
		}
		req, err := parseCompletion(body, false)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		toks, err := e.parsePrompt(req.Prompt)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		b, _ := json.Marshal(toks)
		again, err := e.parsePrompt(b)
		if err != nil || len(again) != len(toks) {
			t.Fatalf("accepted prompt %v does not round-trip: %v", toks, err)
		}
	})
}
