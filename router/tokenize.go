package router

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yuebing/yuebing/internal/openai"
	"github.com/yuebing/yuebing/internal/tokenizer"
)

// Where a request's token ids come from (Options.Tokenize).
const (
	// TokenizeAuto asks an engine's /tokenize once it answers and keeps
	// the local tokenizer when its ids are the engine's (cheaper), the
	// engine's /tokenize otherwise. The default.
	TokenizeAuto = "auto"
	// TokenizeLocal encodes with Options.Encoding and the yuebing-chat-v1
	// template, as yuebing engine-sim does.
	TokenizeLocal = "local"
	// TokenizeEngine asks an engine's POST /tokenize (vLLM's), the ids the
	// engine will run, whatever its model's tokenizer and chat template.
	TokenizeEngine = "engine"
)

// Tokenizer turns text prompts and chats into token ids: locally, with an
// offline BPE and the yuebing-chat-v1 template (internal/tokenizer), or by
// asking an engine's /tokenize. It is safe for concurrent use.
type Tokenizer struct {
	bpe *tokenizer.Tokenizer
	// chats caches each chat message's local ids, so a conversation's
	// earlier turns are not encoded again; nil caches nothing.
	chats *tokenizer.SegmentCache
	// remote asks engines; nil means local only.
	remote *remoteTokenizer
	// useEngine is whether requests go to remote now (auto decides it).
	useEngine atomic.Bool
	m         *tokenMetrics
}

// NewTokenizer returns a local tokenizer of a built-in BPE encoding,
// without a cache.
func NewTokenizer(encoding string) (*Tokenizer, error) {
	bpe, err := tokenizer.New(encoding)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	return &Tokenizer{bpe: bpe, m: newTokenMetrics()}, nil
}

// Encode returns a text prompt's ids. With the engine as the source, an
// engine that cannot answer leaves the local ids (counted as fallback).
func (t *Tokenizer) Encode(text string) []uint32 {
	start := time.Now()
	if t.remote != nil && t.useEngine.Load() {
		k := promptKey(text)
		if ids, ok := t.remote.cache.Get(k); ok {
			t.m.done("cache", start)
			t.m.cacheHit.Inc()
			return ids
		}
		t.m.cacheMiss.Inc()
		ids, err := t.remote.tokenize(tokenizeBody{Prompt: &text})
		if err == nil {
			t.remote.cache.Add(k, ids)
			t.m.done(TokenizeEngine, start)
			return ids
		}
		t.remote.failed(err)
		ids = t.bpe.Encode(text)
		t.m.done("fallback", start)
		return ids
	}
	ids := t.bpe.Encode(text)
	t.m.done(TokenizeLocal, start)
	return ids
}

// EncodeChat returns the ids of a chat's messages with the assistant's
// turn opened, as a chat completion runs them. Rendered messages longer
// than maxBytes in all are refused before anything is encoded.
func (t *Tokenizer) EncodeChat(msgs []openai.Message, maxBytes int) ([]uint32, error) {
	start := time.Now()
	c, err := tokenizer.ReadChat(msgs, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if c.Bytes > maxBytes {
		return nil, fmt.Errorf("%w: messages of %d bytes of text, limit %d", ErrBadRequest, c.Bytes, maxBytes)
	}
	if t.remote != nil && t.useEngine.Load() {
		k := chatKey(msgs)
		if ids, ok := t.remote.cache.Get(k); ok {
			t.m.done("cache", start)
			t.m.cacheHit.Inc()
			return ids, nil
		}
		t.m.cacheMiss.Inc()
		gen := true
		ids, err := t.remote.tokenize(tokenizeBody{Messages: msgs, AddGenerationPrompt: &gen})
		if err == nil {
			t.remote.cache.Add(k, ids)
			t.m.done(TokenizeEngine, start)
			return ids, nil
		}
		t.remote.failed(err)
		ids, _, _ = t.bpe.EncodeChat(c, t.chats)
		t.m.done("fallback", start)
		return ids, nil
	}
	ids, hits, misses := t.bpe.EncodeChat(c, t.chats)
	if t.chats != nil {
		t.m.cacheHit.Add(float64(hits))
		t.m.cacheMiss.Add(float64(misses))
	}
	t.m.done(TokenizeLocal, start)
	return ids, nil
}

// promptKey and chatKey name a prompt's ids in the engine answers' cache:
// a chat by each message's role and content as sent (the engine's template
// may read parts the local one ignores).
func promptKey(text string) tokenizer.Key {
	h := sha256.New()
	h.Write([]byte("prompt\x00"))
	h.Write([]byte(text))
	var k tokenizer.Key
	h.Sum(k[:0])
	return k
}

func chatKey(msgs []openai.Message) tokenizer.Key {
	h := sha256.New()
	h.Write([]byte("chat\x00"))
	var n [8]byte
	for _, m := range msgs {
		for _, s := range [][]byte{[]byte(m.Role), bytes.TrimSpace(m.Content)} {
			l := len(s)
			for i := range n {
				n[i] = byte(l >> (8 * i))
			}
			h.Write(n[:])
			h.Write(s)
		}
	}
	var k tokenizer.Key
	h.Sum(k[:0])
	return k
}

// tokenizeBody is vLLM's POST /tokenize request.
type tokenizeBody struct {
	Model               string           `json:"model,omitempty"`
	Prompt              *string          `json:"prompt,omitempty"`
	Messages            []openai.Message `json:"messages,omitempty"`
	AddGenerationPrompt *bool            `json:"add_generation_prompt,omitempty"`
}

// remoteTokenizer asks engines' /tokenize.
type remoteTokenizer struct {
	model   string
	apiKey  string
	timeout time.Duration
	client  *http.Client
	// urls lists the engines to ask, the first that answers wins; up
	// reports whether one is in the scheduler now.
	urls []string
	up   func(i int) bool
	// cache keeps whole prompts' ids by promptKey or chatKey.
	cache *tokenizer.SegmentCache
	// onFail is told each failure, for the log.
	onFail func(error)
}

func (rt *remoteTokenizer) failed(err error) {
	if rt.onFail != nil {
		rt.onFail(err)
	}
}

// maxTokenizeAnswer bounds an engine's /tokenize answer: a 1M-token
// prompt's ids as JSON numbers.
const maxTokenizeAnswer = 16 << 20

// tokenize asks the engines in turn, those up first.
func (rt *remoteTokenizer) tokenize(b tokenizeBody) ([]uint32, error) {
	b.Model = rt.model
	body, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	var last error
	for pass := range 2 {
		for i, u := range rt.urls {
			if (pass == 0) != rt.up(i) {
				continue
			}
			ids, err := rt.ask(u, body)
			if err == nil {
				return ids, nil
			}
			last = err
		}
	}
	if last == nil {
		last = fmt.Errorf("%w: no engine to tokenize with", ErrNoEngine)
	}
	return nil, last
}

func (rt *remoteTokenizer) ask(base string, body []byte) ([]uint32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rt.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/tokenize", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if rt.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+rt.apiKey)
	}
	resp, err := rt.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s/tokenize: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil, fmt.Errorf("%s/tokenize: status %d", base, resp.StatusCode)
	}
	var out struct {
		Count  int      `json:"count"`
		Tokens []uint32 `json:"tokens"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxTokenizeAnswer)).Decode(&out); err != nil {
		return nil, fmt.Errorf("%s/tokenize: %w", base, err)
	}
	if out.Tokens == nil || out.Count != len(out.Tokens) {
		return nil, fmt.Errorf("%s/tokenize: %d tokens for a count of %d", base, len(out.Tokens), out.Count)
	}
	return out.Tokens, nil
}

// tokenizeBuckets span a cached chat (microseconds) to a long prompt sent
// to a busy engine (a second).
var tokenizeBuckets = []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, .001, .0025, .005, .01, .025, .05, .1, .25, 1}

type tokenMetrics struct {
	requests  *prometheus.CounterVec
	seconds   *prometheus.HistogramVec
	cache     *prometheus.CounterVec
	cacheHit  prometheus.Counter
	cacheMiss prometheus.Counter
}

func newTokenMetrics() *tokenMetrics {
	m := &tokenMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yuebing_router_tokenize_total",
			Help: "Text prompts and chats tokenized, by source: local (the router's BPE and chat template), engine (an engine's /tokenize), cache (an engine's earlier answer), fallback (no engine answered; local ids).",
		}, []string{"source"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "yuebing_router_tokenize_seconds", Help: "Time to tokenize a text prompt or chat, by source.", Buckets: tokenizeBuckets,
		}, []string{"source"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yuebing_router_tokenize_cache_total",
			Help: "Tokenizer cache lookups by result (hit, miss): chat messages' ids with the local source, whole prompts' with the engine's.",
		}, []string{"result"}),
	}
	m.cacheHit, m.cacheMiss = m.cache.WithLabelValues("hit"), m.cache.WithLabelValues("miss")
	return m
}

func (m *tokenMetrics) done(source string, start time.Time) {
	m.requests.WithLabelValues(source).Inc()
	m.seconds.WithLabelValues(source).Observe(time.Since(start).Seconds())
}

func (m *tokenMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.seconds, m.cache}
}

// Probes of TokenizeAuto: a text and a chat whose ids tell tokenizers and
// templates apart (punctuation, digits, accents, whitespace runs, roles).
var (
	probeText = "Hello, world! The year 2024 had 366 days;\n\tcafé déjà vu  --  ¿qué?  <|endoftext|> 東京\n"
	probeChat = []openai.Message{
		{Role: "system", Content: json.RawMessage(`"You are a careful assistant."`)},
		{Role: "user", Content: json.RawMessage(`"What is 17 * 23? Answer in one line."`)},
		{Role: "assistant", Content: json.RawMessage(`"391."`)},
		{Role: "user", Content: json.RawMessage(`"And in words?"`)},
	}
)

// agrees asks the engines for the probes' ids and compares them with the
// local tokenizer's: true when the local ids are the engine's, false when
// they differ, and an error when no engine answered.
func (t *Tokenizer) agrees() (bool, error) {
	ids, err := t.remote.tokenize(tokenizeBody{Prompt: &probeText})
	if err != nil {
		return false, err
	}
	if !equalIDs(ids, t.bpe.Encode(probeText)) {
		return false, nil
	}
	gen := true
	ids, err = t.remote.tokenize(tokenizeBody{Messages: probeChat, AddGenerationPrompt: &gen})
	if err != nil {
		return false, err
	}
	c, err := tokenizer.ReadChat(probeChat, true)
	if err != nil {
		panic("BUG: router: the probe chat does not render: " + err.Error())
	}
	local, _, _ := t.bpe.EncodeChat(c, nil)
	return equalIDs(ids, local), nil
}

func equalIDs(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Source returns where text prompts' ids come from now: TokenizeLocal or
// TokenizeEngine.
func (t *Tokenizer) Source() string {
	if t.remote != nil && t.useEngine.Load() {
		return TokenizeEngine
	}
	return TokenizeLocal
}

// chooseTokenizer settles TokenizeAuto: once an engine answers the probes,
// the local tokenizer serves if its ids are the engine's, the engine's
// /tokenize otherwise. Until then text is tokenized locally.
func (r *Router) chooseTokenizer(ctx context.Context) {
	t := time.NewTicker(r.opts.ProbeInterval)
	defer t.Stop()
	for {
		same, err := r.tok.agrees()
		if err == nil {
			r.tok.useEngine.Store(!same)
			if same {
				r.log.Info("router: the engines' /tokenize agrees with the local tokenizer; tokenizing locally", "encoding", r.opts.Encoding, "template", tokenizer.TemplateName)
			} else {
				r.log.Warn("router: the engines tokenize otherwise than the local tokenizer; asking their /tokenize for each text prompt and chat", "encoding", r.opts.Encoding, "template", tokenizer.TemplateName)
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tokenizeFailed logs an engine /tokenize failure, at most once a probe
// interval: the request goes on with local ids.
func (r *Router) tokenizeFailed(err error) {
	now := time.Now().UnixNano()
	last := r.tokLogged.Load()
	if now-last < int64(r.opts.ProbeInterval) || !r.tokLogged.CompareAndSwap(last, now) {
		return
	}
	r.log.Warn("router: no engine's /tokenize answered; keying with local ids", "err", err)
}
