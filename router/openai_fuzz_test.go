package router

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

var requestSeeds = []string{
	`{"model":"m","prompt":"hello world","max_tokens":5,"stream":true}`,
	`{"model":"m","prompt":[[1,2,3]],"temperature":0.5,"logit_bias":{"1":-100}}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_completion_tokens":9}`,
	`{"MODEL":"a","Model":"b","prompt":"x","max-tokens":3}`,
	"{\"model\":\"\xff\",\"prompt\":\"\\ud800\"}",
}

// TestParsePromptTruncated cuts requests at every byte: no strict prefix of
// a JSON object is one, so each is a bad request, never a panic or a prompt.
func TestParsePromptTruncated(t *testing.T) {
	tok, err := NewTokenizer("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range requestSeeds {
		for _, kind := range []Kind{Completions, ChatCompletions} {
			for n := range len(body) {
				if _, err := ParsePrompt(kind, []byte(body[:n]), tok, PromptLimits{MaxTokens: 100, MaxTextBytes: 100}); !errors.Is(err, ErrBadRequest) {
					t.Fatalf("%q: got %v, want ErrBadRequest", body[:n], err)
				}
			}
		}
	}
}

// TestUnmarshalKeepsEncodingJSONRules pins the rules clients are written
// against: names match whatever their case but not across - and _, and the
// last of duplicate names wins.
func TestUnmarshalKeepsEncodingJSONRules(t *testing.T) {
	var r completionRequest
	if err := unmarshal([]byte(`{"MODEL":"a","Model":"b","prompt":"x","max-tokens":3,"STREAM":true}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Model != "b" || r.MaxTokens != nil || !r.Stream || string(r.Prompt) != `"x"` {
		t.Fatalf("got %+v", r)
	}
}

// FuzzUnmarshalRequest feeds garbage and truncated bodies to the request
// decoder: it must answer a bad request, never panic, and accept and read
// exactly what encoding/json does.
func FuzzUnmarshalRequest(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s), uint16(len(s)))
		f.Add([]byte(s), uint16(len(s)/2))
	}
	f.Fuzz(func(t *testing.T, body []byte, cut uint16) {
		for _, b := range [][]byte{body, body[:int(cut)%(len(body)+1)]} {
			var got, want completionRequest
			err := unmarshal(b, &got)
			if err != nil && !errors.Is(err, ErrBadRequest) {
				t.Fatalf("%q: error %v is not ErrBadRequest", b, err)
			}
			werr := json.Unmarshal(b, &want)
			if (err == nil) != (werr == nil) {
				t.Fatalf("%q: decoder says %v, encoding/json %v", b, err, werr)
			}
			if err == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("%q: decoded %+v, encoding/json %+v", b, got, want)
			}
			var gc, wc chatRequest
			err, werr = unmarshal(b, &gc), json.Unmarshal(b, &wc)
			if (err == nil) != (werr == nil) {
				t.Fatalf("%q: chat: decoder says %v, encoding/json %v", b, err, werr)
			}
			if err == nil && !reflect.DeepEqual(gc, wc) {
				t.Fatalf("%q: chat: decoded %+v, encoding/json %+v", b, gc, wc)
			}
		}
	})
}
