package enginesim_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/internal/servetest"
)

type completion struct {
	// HasUsage is set by streamed: the chunk has a "usage" key, null or not.
	HasUsage bool   `json:"-"`
	ID       string `json:"id"`
	Object   string `json:"object"`
	Model    string `json:"model"`
	Choices  []struct {
		Text    string `json:"text"`
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Yuebing *struct {
		LocalHitTokens int `json:"local_hit_tokens"`
		PoolHitTokens  int `json:"pool_hit_tokens"`
		ComputedTokens int `json:"computed_tokens"`
	} `json:"yuebing"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func post(t *testing.T, url, body string) (int, completion) {
	t.Helper()
	return postTo(t, url+"/v1/completions", body)
}

func postTo(t *testing.T, url, body string) (int, completion) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c completion
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatalf("decoding the answer to %s: %v", body, err)
	}
	return resp.StatusCode, c
}

func tokensJSON(toks []uint32) string {
	b, _ := json.Marshal(toks)
	return string(b)
}

func TestCompletionsAPI(t *testing.T) {
	e := engine(t, nil)
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	p := tokensJSON(prompt(1, 70))

	status, c := post(t, srv.URL, `{"model":"test","prompt":`+p+`,"max_tokens":3}`)
	if status != 200 || c.Object != "text_completion" || len(c.Choices) != 1 || *c.Choices[0].FinishReason != "length" ||
		c.Usage.PromptTokens != 70 || c.Usage.CompletionTokens != 3 || c.Yuebing.ComputedTokens != 70 {
		t.Fatalf("%d %+v", status, c)
	}
	if n := strings.Count(c.Choices[0].Text, " t"); n != 3 {
		t.Errorf("text %q has %d tokens", c.Choices[0].Text, n)
	}
	// The same prompt nested, as OpenAI allows: a local hit now.
	if status, c = post(t, srv.URL, `{"prompt":[`+p+`],"max_tokens":1}`); status != 200 || c.Yuebing.LocalHitTokens != 64 {
		t.Fatalf("%d %+v", status, c)
	}
	if status, c = post(t, srv.URL, `{"prompt":"hello","max_tokens":1}`); status != 200 || c.Usage.PromptTokens != 1 { // one cl100k token
		t.Fatalf("string prompt: %d %+v", status, c)
	}
	first := c.ID
	if status, c = post(t, srv.URL, `{"prompt":["hello"],"max_tokens":1}`); status != 200 || c.Usage.PromptTokens != 1 || c.ID == first {
		t.Fatalf("a list of one string: %d %+v (ids %s, %s)", status, c, first, c.ID)
	}
	for _, bad := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"prompt":[]}`, 400, "invalid_request"},
		{`{"prompt":[-1]}`, 400, "invalid_request"},
		{`{"prompt":{"a":1}}`, 400, "invalid_request"},
		{`{"max_tokens":2}`, 400, "invalid_request"},
		{`{"prompt":[1],"max_tokens":0}`, 400, "invalid_request"},
		{`{"prompt":[[1],[2]]}`, 400, "invalid_request"},
		{`{"prompt":[1],"n":2}`, 400, "invalid_request"},
		{`{"prompt":["a","b"]}`, 400, "invalid_request"},
		{`{"prompt":[1],"logprobs":1}`, 400, "invalid_request"},
		{`{"prompt":[1],"echo":true}`, 400, "invalid_request"},
		{`not json`, 400, "invalid_request"},
		{`{"model":"other","prompt":[1]}`, 404, "model_not_found"},
		{`{"prompt":` + tokensJSON(prompt(1, 65*32)) + `}`, 400, "context_length_exceeded"},
	} {
		status, c := post(t, srv.URL, bad.body)
		if status != bad.status || c.Error == nil || c.Error.Code != bad.code {
			t.Errorf("%.40s: %d %+v, want %d %s", bad.body, status, c.Error, bad.status, bad.code)
		}
	}
	for path, want := range map[string]string{"/health": `"ok"`, "/metrics": "enginesim_prompt_tokens_total 142", "/v1/models": `"created":`} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte(want)) {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
		}
	}
}

// streamed posts body and returns the stream's data lines, each chunk
// decoded, and the [DONE] marker's presence at the end.
func streamed(t *testing.T, url, body string) ([]completion, bool) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var out []completion
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if done {
			t.Fatalf("data after [DONE]: %s", data)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c completion
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		var keys map[string]json.RawMessage
		json.Unmarshal([]byte(data), &keys)
		_, c.HasUsage = keys["usage"]
		out = append(out, c)
	}
	return out, done
}

func TestCompletionsStream(t *testing.T) {
	e := engine(t, nil)
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	// Usage only when asked for, in a chunk of its own with no choices
	// (OpenAI's stream_options.include_usage; vLLM's bench reads it so).
	for _, include := range []bool{false, true} {
		body := `{"prompt":[1,2,3],"max_tokens":4,"stream":true}`
		if include {
			body = `{"prompt":[1,2,3],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`
		}
		cs, done := streamed(t, srv.URL+"/v1/completions", body)
		want := 5
		if include {
			want = 6
		}
		if !done || len(cs) != want {
			t.Fatalf("include_usage %v: %d chunks, done %v", include, len(cs), done)
		}
		for i, c := range cs[:5] {
			last := i == 4
			if c.Object != "text_completion" || len(c.Choices) != 1 || (c.Choices[0].FinishReason != nil) != last || c.Usage != nil || c.HasUsage != include ||
				(!last && !strings.HasPrefix(c.Choices[0].Text, " t")) || (last && c.Yuebing == nil) {
				t.Errorf("include_usage %v: chunk %d: %+v", include, i, c)
			}
		}
		if include {
			if u := cs[5]; len(u.Choices) != 0 || u.Usage == nil || u.Usage.PromptTokens != 3 || u.Usage.CompletionTokens != 4 {
				t.Errorf("usage chunk: %+v", u)
			}
		}
	}
}

func TestChatCompletions(t *testing.T) {
	e := engine(t, nil)
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	url := srv.URL + "/v1/chat/completions"
	turn1 := `[{"role":"system","content":"You are terse."},{"role":"user","content":"` + strings.Repeat("hello ", 20) + `"}]`
	status, c := postTo(t, url, `{"model":"test","messages":`+turn1+`,"max_completion_tokens":3}`)
	if status != 200 || c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-") || len(c.Choices) != 1 ||
		c.Choices[0].Message == nil || c.Choices[0].Message.Role != "assistant" || strings.Count(c.Choices[0].Message.Content, " t") != 3 ||
		*c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 3 {
		t.Fatalf("%d %+v", status, c)
	}
	// The next turn starts with the previous one: its prefix is cached.
	turn2 := turn1[:len(turn1)-1] + `,{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"text","text":"more"}]}]`
	cs, done := streamed(t, url, `{"messages":`+turn2+`,"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`)
	if !done || len(cs) != 4 {
		t.Fatalf("%d chunks, done %v", len(cs), done)
	}
	for i, c := range cs[:3] {
		last := i == 2
		if c.Object != "chat.completion.chunk" || len(c.Choices) != 1 || c.Choices[0].Delta == nil ||
			(i == 0) != (c.Choices[0].Delta.Role == "assistant") || (c.Choices[0].FinishReason != nil) != last ||
			(!last && (c.Choices[0].Delta.Content == nil || !strings.HasPrefix(*c.Choices[0].Delta.Content, " t"))) {
			t.Errorf("chunk %d: %+v", i, c)
		}
	}
	if cs[2].Yuebing == nil || cs[2].Yuebing.LocalHitTokens == 0 {
		t.Errorf("the second turn did not hit the first's prefix: %+v", cs[2].Yuebing)
	}
	if u := cs[3]; len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != 2 {
		t.Errorf("usage chunk: %+v", u)
	}
	for _, bad := range []string{`{}`, `{"messages":[]}`, `{"messages":[{"content":"x"}]}`, `{"messages":"hi"}`,
		`{"messages":[{"role":"user","content":5}]}`, `{"prompt":"hi","messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"user","content":"x"}],"logprobs":true}`} {
		if status, c := postTo(t, url, bad); status != 400 || c.Error == nil || c.Error.Code != "invalid_request" {
			t.Errorf("%s: %d %+v", bad, status, c.Error)
		}
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET %s: %d, Allow %q", url, resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// The real binaries: two engine-sim processes on one yuebing serve; what the
// first computed, the second loads.
func TestEngineSimBinary(t *testing.T) {
	_, url := servetest.Serve(t)
	args := []string{"engine-sim", "--listen", "127.0.0.1:0", "--yuebing", url, "--layout", "sim-70b",
		"--block-tokens", "32", "--time-scale", "0.001", "--pool-blocks", "16"}
	a := servetest.Start(t, "ready", args...).Banner["http"]
	b := servetest.Start(t, "ready", args...).Banner["http"]
	p := tokensJSON(prompt(9, 100))
	if status, c := post(t, a, `{"prompt":`+p+`,"max_tokens":2}`); status != 200 || c.Yuebing.ComputedTokens != 100 {
		t.Fatalf("a: %d %+v", status, c)
	}
	// a's saves are asynchronous: retry b until they landed (bounded).
	var c completion
	for range 200 {
		var status int
		status, c = post(t, b, `{"prompt":`+p+`,"max_tokens":2}`)
		if status != 200 {
			t.Fatalf("b: %d %+v", status, c)
		}
		if c.Yuebing.PoolHitTokens+c.Yuebing.LocalHitTokens == 96 {
			break
		}
	}
	if c.Yuebing.PoolHitTokens != 96 && c.Yuebing.LocalHitTokens != 96 {
		t.Fatalf("b never hit a's blocks: %+v", c.Yuebing)
	}
}
