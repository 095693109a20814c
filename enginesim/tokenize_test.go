package enginesim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/internal/openai"
	"github.com/yuebing/yuebing/internal/tokenizer"
)

type tokenized struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []uint32 `json:"tokens"`
	Error       *struct {
		Code string `json:"code"`
		Type string `json:"type"`
	} `json:"error"`
}

func tokenize(t *testing.T, url, body string) (int, tokenized) {
	t.Helper()
	resp, err := http.Post(url+"/tokenize", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out tokenized
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("decoding the answer to %s: %v", body, err)
	}
	return resp.StatusCode, out
}

// /tokenize answers as vLLM's does, with the ids the engine runs: a
// completion's prompt with the engine's BPE, a chat's messages with the
// yuebing-chat-v1 template and, by default, the assistant's turn opened.
func TestTokenize(t *testing.T) {
	e := engine(t, nil)
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	tok, err := tokenizer.New("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	status, got := tokenize(t, srv.URL, `{"model":"test","prompt":"hello world, once more"}`)
	if want := tok.Encode("hello world, once more"); status != 200 || !slices.Equal(got.Tokens, want) || got.Count != len(want) ||
		got.MaxModelLen != 64*32 {
		t.Fatalf("prompt: %d %+v, want %v", status, got, want)
	}
	msgs := `[{"role":"system","content":"You are terse."},{"role":"user","content":"hi"}]`
	var m []openai.Message
	json.Unmarshal([]byte(msgs), &m)
	for _, tc := range []struct {
		extra string
		gen   bool
	}{{"", true}, {`,"add_generation_prompt":true`, true}, {`,"add_generation_prompt":false`, false}} {
		c, _ := tokenizer.ReadChat(m, tc.gen)
		want, _, _ := tok.EncodeChat(c, nil)
		if status, got := tokenize(t, srv.URL, `{"messages":`+msgs+tc.extra+`}`); status != 200 || !slices.Equal(got.Tokens, want) {
			t.Errorf("messages%s: %d %v, want %v", tc.extra, status, got.Tokens, want)
		}
	}
	// What /tokenize says is what a chat completion runs: the prompt
	// tokens of its usage.
	status, c := postTo(t, srv.URL+"/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":1}`)
	_, ids := tokenize(t, srv.URL, `{"messages":`+msgs+`}`)
	if status != 200 || c.Usage.PromptTokens != ids.Count {
		t.Errorf("chat completion ran %d prompt tokens, /tokenize says %d", c.Usage.PromptTokens, ids.Count)
	}
	for _, bad := range []struct {
		body string
		code string
	}{
		{`{"prompt":"a","messages":[{"role":"user","content":"x"}]}`, "invalid_request"},
		{`{"messages":[]}`, "invalid_request"},
		{`{}`, "invalid_request"},
		{`{"messages":[{"role":"user","content":"x"}],"continue_final_message":true}`, "invalid_request"},
		{`{"prompt":7}`, "invalid_request"},
		{`{"model":"other","prompt":"a"}`, "model_not_found"},
		{`{"prompt":"` + strings.Repeat("a", 2<<20) + `"}`, "invalid_request"},
	} {
		status, got := tokenize(t, srv.URL, bad.body)
		if status/100 != 4 || got.Error == nil || got.Error.Code != bad.code || got.Error.Type != "invalid_request_error" {
			t.Errorf("%.80s: %d %+v, want a 4xx %s", bad.body, status, got.Error, bad.code)
		}
	}
}
