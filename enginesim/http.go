package enginesim

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// maxBody bounds a completion request: a 128k-token prompt as JSON numbers
// is about 1 MiB; 8 MiB leaves room without letting a client pin memory.
const maxBody = 8 << 20

// completionRequest is the part of OpenAI's completion and chat completion
// requests the simulator honours. prompt is token ids (one list, or a list
// holding one list), or a string (or a list holding one), tokenized with
// the engine's BPE (Options.Encoding). A chat's messages are rendered with
// the yuebing-chat-v1 template and an open assistant turn (chatPrompt).
type completionRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            json.RawMessage `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N        *int            `json:"n"`
	Echo     bool            `json:"echo"`
	Logprobs json.RawMessage `json:"logprobs"`
}

// message is a chat message as a choice carries it, or the change a
// streamed chunk carries (delta).
type message struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type choice struct {
	Text         *string  `json:"text,omitempty"`
	Message      *message `json:"message,omitempty"`
	Delta        *message `json:"delta,omitempty"`
	Index        int      `json:"index"`
	Logprobs     any      `json:"logprobs"`
	FinishReason *string  `json:"finish_reason"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// cacheReport is the simulator's extension of a completion: where the
// prompt's KV came from and what it cost.
type cacheReport struct {
	Engine           string         `json:"engine"`
	QueueS           float64        `json:"queue_s"`
	TTFTS            float64        `json:"ttft_s"`
	LocalHitTokens   int            `json:"local_hit_tokens"`
	PoolHitTokens    int            `json:"pool_hit_tokens"`
	PoolTierTokens   map[string]int `json:"pool_tier_tokens,omitempty"`
	ComputedTokens   int            `json:"computed_tokens"`
	RecomputedTokens int            `json:"recomputed_tokens"`
	SkippedLoad      int            `json:"skipped_load_tokens"`
	LoadBytes        int64          `json:"load_bytes"`
	LoadS            float64        `json:"load_s"`
	LoadStallS       float64        `json:"load_stall_s"`
}

type completion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []choice     `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
	Yuebing *cacheReport `json:"yuebing,omitempty"`
}

// Handler serves the engine's OpenAI-compatible API: POST /v1/completions,
// POST /v1/chat/completions, GET /v1/models, GET /health and GET /metrics,
// and vLLM's POST /tokenize.
func (e *Engine) Handler() http.Handler {
	created := time.Now().Unix()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		e.serveCompletion(w, r, false)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		e.serveCompletion(w, r, true)
	})
	mux.HandleFunc("POST /tokenize", e.serveTokenize)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{
			{"id": e.opts.Model, "object": "model", "created": created, "owned_by": "yuebing-engine-sim"},
		}})
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		stopped := e.mu.stopped
		e.mu.Unlock()
		if stopped {
			writeError(w, ErrStopped)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		e.WriteMetrics(w)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/completions" || r.URL.Path == "/v1/chat/completions" {
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, http.StatusMethodNotAllowed, errBody("method_not_allowed", "invalid_request_error", fmt.Sprintf("%s %s: use POST", r.Method, r.URL.Path)))
			return
		}
		writeJSON(w, http.StatusNotFound, errBody("not_found", "invalid_request_error", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)))
	})
	return mux
}

// newID returns a completion id unique across engines and restarts, as
// clients that log or deduplicate by id expect.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (e *Engine) serveCompletion(w http.ResponseWriter, r *http.Request, chat bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, errBody("too_large", "invalid_request_error", fmt.Sprintf("request body over %d bytes", maxBody)))
		return
	}
	req, err := parseCompletion(body, chat)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.Model != "" && req.Model != e.opts.Model {
		writeJSON(w, http.StatusNotFound, errBody("model_not_found", "invalid_request_error", fmt.Sprintf("model %q: this engine serves %q", req.Model, e.opts.Model)))
		return
	}
	maxTokens := 16 // OpenAI's default
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	if req.MaxCompletionTokens != nil {
		maxTokens = *req.MaxCompletionTokens // the newer name wins, as in OpenAI's API
	}
	var tokens []uint32
	if chat {
		tokens, err = e.chatPrompt(req.Messages, true)
	} else {
		tokens, err = e.parsePrompt(req.Prompt)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	j, err := e.Start(Request{Tokens: tokens, MaxTokens: maxTokens})
	if err != nil {
		writeError(w, err)
		return
	}
	c := completion{ID: newID("cmpl-"), Object: "text_completion", Created: time.Now().Unix(), Model: e.opts.Model}
	if chat {
		c.ID, c.Object = newID("chatcmpl-"), "chat.completion"
	}
	if req.Stream {
		includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		e.stream(w, r, j, c, chat, includeUsage)
		return
	}
	res, err := j.Wait(r.Context())
	if r.Context().Err() != nil {
		return // the client left; the job runs to its end regardless
	}
	if err != nil {
		writeError(w, err)
		return
	}
	reason := "length"
	text := detokenize(res.Output)
	if chat {
		c.Choices = []choice{{Message: &message{Role: "assistant", Content: &text}, FinishReason: &reason}}
	} else {
		c.Choices = []choice{{Text: &text, FinishReason: &reason}}
	}
	c.Usage = &usage{PromptTokens: len(tokens), CompletionTokens: len(res.Output), TotalTokens: len(tokens) + len(res.Output)}
	c.Yuebing = e.report(res)
	writeJSON(w, http.StatusOK, c)
}

// stream answers with server-sent events, one chunk per token as the engine
// produces it (a chat's first chunk names the role), the last carrying the
// finish reason and cache report; then, when the client asked for it
// (stream_options.include_usage), a chunk with the usage and no choices, as
// OpenAI and vLLM send it; then "data: [DONE]".
func (e *Engine) stream(w http.ResponseWriter, r *http.Request, j *Job, c completion, chat, includeUsage bool) {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(c completion) bool {
		var b []byte
		if includeUsage {
			// OpenAI's stream_options.include_usage: every chunk carries
			// usage, null until the last.
			b, _ = json.Marshal(withUsage{c, c.Usage})
		} else {
			b, _ = json.Marshal(c)
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	if chat {
		c.Object = "chat.completion.chunk"
	}
	piece := func(text string, first bool) choice {
		if !chat {
			return choice{Text: &text}
		}
		d := &message{Content: &text}
		if first {
			d.Role = "assistant"
		}
		return choice{Delta: d}
	}
	first := true
	for tok := range j.Tokens() {
		c.Choices = []choice{piece(detokenize([]uint32{tok}), first)}
		first = false
		if !send(c) {
			return // the client left; the job runs to its end regardless
		}
	}
	done := func() {
		fmt.Fprint(w, "data: [DONE]\n\n")
		if fl != nil {
			fl.Flush()
		}
	}
	res, err := j.Wait(r.Context())
	if err != nil {
		b, _ := json.Marshal(errBody(errCode(err)))
		fmt.Fprintf(w, "data: %s\n\n", b)
		done()
		return
	}
	reason := "length"
	last := piece("", first)
	if chat {
		last.Delta = &message{}
		if first {
			last.Delta.Role = "assistant"
		}
	}
	last.FinishReason = &reason
	c.Choices = []choice{last}
	c.Yuebing = e.report(res)
	if !send(c) {
		return
	}
	if includeUsage {
		c.Choices, c.Yuebing = []choice{}, nil
		c.Usage = &usage{PromptTokens: res.PromptTokens, CompletionTokens: len(res.Output), TotalTokens: res.PromptTokens + len(res.Output)}
		if !send(c) {
			return
		}
	}
	done()
}

// withUsage is a streamed chunk whose usage is written even when null: its
// Usage field hides the completion's, which is omitted when empty.
type withUsage struct {
	completion
	Usage *usage `json:"usage"`
}

func (e *Engine) report(res Result) *cacheReport {
	return &cacheReport{
		Engine: e.opts.Name, QueueS: res.Queue.Seconds(), TTFTS: res.TTFT.Seconds(),
		LocalHitTokens: res.LocalHitTokens, PoolHitTokens: res.PoolHitTokens, PoolTierTokens: res.TierTokens,
		ComputedTokens: res.ComputedTokens, RecomputedTokens: res.RecomputedTokens, SkippedLoad: res.SkippedLoadTokens,
		LoadBytes: res.LoadBytes, LoadS: res.LoadTime.Seconds(), LoadStallS: res.LoadStall.Seconds(),
	}
}

func parseCompletion(body []byte, chat bool) (completionRequest, error) {
	var req completionRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%w: request body is not a completion request: %v", ErrInvalid, err)
	}
	if req.N != nil && *req.N != 1 {
		return req, fmt.Errorf("%w: n=%d: the simulator generates one choice", ErrInvalid, *req.N)
	}
	// The simulator has no vocabulary, so no log probabilities and no echo
	// of the prompt as text: refused rather than answered with nulls a
	// client would index.
	if lp := bytes.TrimSpace(req.Logprobs); len(lp) > 0 && !bytes.Equal(lp, []byte("null")) && !bytes.Equal(lp, []byte("false")) && !bytes.Equal(lp, []byte("0")) {
		return req, fmt.Errorf("%w: logprobs: the simulator has no vocabulary to score tokens with", ErrInvalid)
	}
	if req.Echo {
		return req, fmt.Errorf("%w: echo: the simulator has no vocabulary to render the prompt with", ErrInvalid)
	}
	if chat && req.Prompt != nil {
		return req, fmt.Errorf("%w: a chat completion takes messages, not prompt", ErrInvalid)
	}
	return req, nil
}

// parsePrompt accepts token ids ([1,2,3] or [[1,2,3]]) or a string (or a
// list holding one), tokenized with the engine's BPE.
func (e *Engine) parsePrompt(raw json.RawMessage) ([]uint32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, fmt.Errorf("%w: prompt is required", ErrInvalid)
	}
	var toks []uint32
	if err := json.Unmarshal(raw, &toks); err == nil {
		return toks, nil
	}
	var nested [][]uint32
	if err := json.Unmarshal(raw, &nested); err == nil {
		if len(nested) != 1 {
			return nil, fmt.Errorf("%w: %d prompts: the simulator takes one per request", ErrInvalid, len(nested))
		}
		return nested[0], nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	if err != nil {
		var list []string
		if json.Unmarshal(raw, &list) == nil {
			if len(list) != 1 {
				return nil, fmt.Errorf("%w: %d prompts: the simulator takes one per request", ErrInvalid, len(list))
			}
			s, err = list[0], nil
		}
	}
	if err == nil {
		return e.encodeText(s)
	}
	return nil, fmt.Errorf("%w: prompt must be token ids (non-negative integers below 2^32) or a string", ErrInvalid)
}

// detokenize renders token ids as text: the simulator has no vocabulary.
func detokenize(toks []uint32) string {
	var b []byte
	for _, t := range toks {
		b = append(b, " t"...)
		b = strconv.AppendUint(b, uint64(t), 10)
	}
	return string(b)
}

func errCode(err error) (code, typ, msg string) {
	switch {
	case errors.Is(err, ErrOverloaded):
		return "overloaded", "server_error", err.Error()
	case errors.Is(err, ErrStopped):
		return "unavailable", "server_error", err.Error()
	case errors.Is(err, ErrTooLong):
		return "context_length_exceeded", "invalid_request_error", err.Error()
	case errors.Is(err, ErrInvalid):
		return "invalid_request", "invalid_request_error", err.Error()
	}
	return "internal", "server_error", err.Error()
}

func errBody(code, typ, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"code": code, "type": typ, "message": msg}}
}

func writeError(w http.ResponseWriter, err error) {
	code, typ, msg := errCode(err)
	status := http.StatusInternalServerError
	switch code {
	case "overloaded":
		status = http.StatusTooManyRequests
	case "unavailable":
		status = http.StatusServiceUnavailable
	case "context_length_exceeded", "invalid_request":
		status = http.StatusBadRequest
	}
	writeJSON(w, status, errBody(code, typ, msg))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
