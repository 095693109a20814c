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
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Text         string  `json:"text"`
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
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
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
	if status, c = post(t, srv.URL, `{"prompt":"hello","max_tokens":1}`); status != 200 || c.Usage.PromptTokens != 5 {
		t.Fatalf("string prompt: %d %+v", status, c)
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
		{`not json`, 400, "invalid_request"},
		{`{"model":"other","prompt":[1]}`, 404, "model_not_found"},
		{`{"prompt":` + tokensJSON(prompt(1, 65*32)) + `}`, 400, "context_length_exceeded"},
	} {
		status, c := post(t, srv.URL, bad.body)
		if status != bad.status || c.Error == nil || c.Error.Code != bad.code {
			t.Errorf("%.40s: %d %+v, want %d %s", bad.body, status, c.Error, bad.status, bad.code)
		}
	}
	for path, want := range map[string]string{"/health": `"ok"`, "/metrics": "enginesim_prompt_tokens_total 145", "/v1/models": `"test"`} {
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

func TestCompletionsStream(t *testing.T) {
	e := engine(t, nil)
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":[1,2,3],"max_tokens":4,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
		}
	}
	if len(events) != 6 || events[5] != "[DONE]" {
		t.Fatalf("events %q", events)
	}
	for i, ev := range events[:5] {
		var c completion
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatal(err)
		}
		last := i == 4
		if (c.Choices[0].FinishReason != nil) != last || (c.Usage != nil) != last || (!last && !strings.HasPrefix(c.Choices[0].Text, " t")) {
			t.Errorf("event %d: %s", i, ev)
		}
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
