package enginesim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// maxBody bounds a completion request: a 128k-token prompt as JSON numbers
// is about 1 MiB; 8 MiB leaves room without letting a client pin memory.
const maxBody = 8 << 20

// completionRequest is the part of OpenAI's completion request the
// simulator honours. prompt is token ids (one list, or a list holding one
// list), or a string, tokenized one token per byte: the simulator has no
// vocabulary.
type completionRequest struct {
	Model     string          `json:"model"`
	Prompt    json.RawMessage `json:"prompt"`
	MaxTokens *int            `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	N         *int            `json:"n"`
}

type choice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
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
// GET /v1/models, GET /health and GET /metrics.
func (e *Engine) Handler() http.Handler {
	var ids atomic.Uint64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		e.serveCompletion(w, r, ids.Add(1))
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{
			{"id": e.opts.Model, "object": "model", "owned_by": "yuebing-engine-sim"},
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
		writeJSON(w, http.StatusNotFound, errBody("not_found", "invalid_request_error", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)))
	})
	return mux
}

func (e *Engine) serveCompletion(w http.ResponseWriter, r *http.Request, id uint64) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, errBody("too_large", "invalid_request_error", fmt.Sprintf("request body over %d bytes", maxBody)))
		return
	}
	req, err := parseCompletion(body)
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
	tokens, err := parsePrompt(req.Prompt)
	if err != nil {
		writeError(w, err)
		return
	}
	j, err := e.Start(Request{Tokens: tokens, MaxTokens: maxTokens})
	if err != nil {
		writeError(w, err)
		return
	}
	c := completion{ID: "cmpl-" + e.opts.Name + "-" + strconv.FormatUint(id, 10), Object: "text_completion", Created: time.Now().Unix(), Model: e.opts.Model}
	if req.Stream {
		e.stream(w, r, j, c)
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
	c.Choices = []choice{{Text: detokenize(res.Output), FinishReason: &reason}}
	c.Usage = &usage{PromptTokens: len(tokens), CompletionTokens: len(res.Output), TotalTokens: len(tokens) + len(res.Output)}
	c.Yuebing = e.report(res)
	writeJSON(w, http.StatusOK, c)
}

// stream answers with server-sent events, one chunk per token as the engine
// produces it, the last carrying the finish reason, usage and cache report,
// then "data: [DONE]".
func (e *Engine) stream(w http.ResponseWriter, r *http.Request, j *Job, c completion) {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(c completion) bool {
		b, _ := json.Marshal(c)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	for tok := range j.Tokens() {
		c.Choices = []choice{{Text: detokenize([]uint32{tok})}}
		if !send(c) {
			return // the client left; the job runs to its end regardless
		}
	}
	res, err := j.Wait(r.Context())
	if err != nil {
		b, _ := json.Marshal(errBody(errCode(err)))
		fmt.Fprintf(w, "data: %s\n\n", b)
		return
	}
	reason := "length"
	c.Choices = []choice{{FinishReason: &reason}}
	c.Usage = &usage{PromptTokens: res.PromptTokens, CompletionTokens: len(res.Output), TotalTokens: res.PromptTokens + len(res.Output)}
	c.Yuebing = e.report(res)
	if send(c) {
		fmt.Fprint(w, "data: [DONE]\n\n")
		if fl != nil {
			fl.Flush()
		}
	}
}

func (e *Engine) report(res Result) *cacheReport {
	return &cacheReport{
		Engine: e.opts.Name, QueueS: res.Queue.Seconds(), TTFTS: res.TTFT.Seconds(),
		LocalHitTokens: res.LocalHitTokens, PoolHitTokens: res.PoolHitTokens, PoolTierTokens: res.TierTokens,
		ComputedTokens: res.ComputedTokens, RecomputedTokens: res.RecomputedTokens, SkippedLoad: res.SkippedLoadTokens,
		LoadBytes: res.LoadBytes, LoadS: res.LoadTime.Seconds(), LoadStallS: res.LoadStall.Seconds(),
	}
}

func parseCompletion(body []byte) (completionRequest, error) {
	var req completionRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%w: request body is not a completion request: %v", ErrInvalid, err)
	}
	if req.N != nil && *req.N != 1 {
		return req, fmt.Errorf("%w: n=%d: the simulator generates one choice", ErrInvalid, *req.N)
	}
	return req, nil
}

// parsePrompt accepts token ids ([1,2,3] or [[1,2,3]]) or a string.
func parsePrompt(raw json.RawMessage) ([]uint32, error) {
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
	if err := json.Unmarshal(raw, &s); err == nil {
		toks = make([]uint32, len(s))
		for i := range len(s) {
			toks[i] = uint32(s[i])
		}
		return toks, nil
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
