package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/yuebing/yuebing/internal/openai"
)

// Kind is the OpenAI endpoint a request came to.
type Kind uint8

// The endpoints the router serves.
const (
	Completions Kind = iota + 1
	ChatCompletions
)

// Path returns the endpoint's path, the same on the router and on engines.
func (k Kind) Path() string {
	if k == ChatCompletions {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// Prompt is what the router needs of a request: its tokens, its expected
// output, whether it streams. The body is forwarded to engines unchanged.
type Prompt struct {
	Model     string
	Tokens    []uint32
	MaxTokens int // 0 when the request states none
	Stream    bool
}

// completionRequest holds the fields of POST /v1/completions the router
// reads; the rest pass through to the engine.
type completionRequest struct {
	Model     string          `json:"model"`
	Prompt    json.RawMessage `json:"prompt"`
	MaxTokens *int            `json:"max_tokens"`
	Stream    bool            `json:"stream"`
}

type chatRequest struct {
	Model               string           `json:"model"`
	Messages            []openai.Message `json:"messages"`
	MaxTokens           *int             `json:"max_tokens"`
	MaxCompletionTokens *int             `json:"max_completion_tokens"`
	Stream              bool             `json:"stream"`
}

// PromptLimits bound a prompt.
type PromptLimits struct {
	// MaxTokens bounds its tokens.
	MaxTokens int
	// MaxTextBytes bounds its text, before it is tokenized.
	MaxTextBytes int
}

// encode tokenizes text within l.
func (l PromptLimits) encode(tok *Tokenizer, text string) ([]uint32, error) {
	if len(text) > l.MaxTextBytes {
		return nil, fmt.Errorf("%w: prompt of %d bytes of text, limit %d", ErrBadRequest, len(text), l.MaxTextBytes)
	}
	return tok.Encode(text), nil
}

// ParsePrompt reads an OpenAI request body. A completion prompt may be a
// string, one token-id array, or a one-element array of either (the router
// places one prompt per request); text is tokenized with tok. A chat's
// messages are tokenized with the assistant's turn opened, as the engine
// runs them (Tokenizer.EncodeChat), so conversations that share turns
// share a token prefix.
func ParsePrompt(kind Kind, body []byte, tok *Tokenizer, lim PromptLimits) (Prompt, error) {
	var p Prompt
	maxTokens := lim.MaxTokens
	switch kind {
	case Completions:
		var err error
		if p, err = parseCompletion(body, tok, lim); err != nil {
			return p, err
		}
	case ChatCompletions:
		var r chatRequest
		if err := unmarshal(body, &r); err != nil {
			return p, err
		}
		p.Model, p.Stream = r.Model, r.Stream
		mt, err := maxOut(r.MaxTokens, r.MaxCompletionTokens)
		if err != nil {
			return p, err
		}
		p.MaxTokens = mt
		if p.Tokens, err = tok.EncodeChat(r.Messages, lim.MaxTextBytes); err != nil {
			return p, err
		}
	default:
		panic("BUG: router: unknown request kind")
	}
	if len(p.Tokens) == 0 {
		return p, fmt.Errorf("%w: empty prompt", ErrBadRequest)
	}
	if len(p.Tokens) > maxTokens {
		return p, fmt.Errorf("%w: prompt of %d tokens, limit %d", ErrBadRequest, len(p.Tokens), maxTokens)
	}
	return p, nil
}

// parseCompletion reads POST /v1/completions.
func parseCompletion(body []byte, tok *Tokenizer, lim PromptLimits) (Prompt, error) {
	var r completionRequest
	if err := unmarshal(body, &r); err != nil {
		return Prompt{}, err
	}
	mt, err := maxOut(r.MaxTokens, nil)
	if err != nil {
		return Prompt{}, err
	}
	ts, err := completionPrompt(r.Prompt, tok, lim)
	if err != nil {
		return Prompt{}, err
	}
	return Prompt{Model: r.Model, Tokens: ts, MaxTokens: mt, Stream: r.Stream}, nil
}

// unmarshal decodes one JSON request with go-json-experiment/json, the
// prototype of encoding/json/v2: malformed, truncated and trailing input is
// an error, never a panic, and it reads a 2,048-token prompt about as fast as
// goccy/go-json did and several times faster than encoding/json (parsing was
// most of the router's CPU per decision; docs/benchmarks.md).
func unmarshal(body []byte, v any) error {
	if err := jsonv2.Unmarshal(body, v, decodeOptions); err != nil {
		return fmt.Errorf("%w: body is not a JSON request: %w", ErrBadRequest, err)
	}
	return nil
}

// decodeOptions keep encoding/json's rules, which clients of OpenAI
// endpoints are written against: names match as strings.EqualFold does, the
// last of duplicate names wins, invalid UTF-8 becomes U+FFFD, and fields the
// router does not read (temperature, tools, ...) are ignored for the engine
// to judge.
var decodeOptions = jsonv2.JoinOptions(
	jsonv2.MatchCaseInsensitiveNames(true),
	jsonv1.MatchCaseSensitiveDelimiter(true),
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
)

func maxOut(a, b *int) (int, error) {
	for _, v := range []*int{a, b} {
		if v == nil {
			continue
		}
		if *v < 1 || *v > 1<<24 {
			return 0, fmt.Errorf("%w: max_tokens %d, want 1 to %d", ErrBadRequest, *v, 1<<24)
		}
		return *v, nil
	}
	return 0, nil
}

func completionPrompt(raw json.RawMessage, tok *Tokenizer, lim PromptLimits) ([]uint32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("%w: prompt: required", ErrBadRequest)
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%w: prompt: %w", ErrBadRequest, err)
		}
		return lim.encode(tok, s)
	}
	if ids, ok := tokenArray(raw); ok {
		return ids, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%w: prompt: want a string, token ids, or a one-element array of either", ErrBadRequest)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: empty prompt", ErrBadRequest)
	}
	first := bytes.TrimSpace(list[0])
	if len(first) > 0 && (first[0] == '"' || first[0] == '[') {
		if len(list) != 1 {
			return nil, fmt.Errorf("%w: prompt: %d prompts; the router places one prompt per request", ErrBadRequest, len(list))
		}
		return completionPrompt(first, tok, lim)
	}
	ids := make([]uint32, len(list))
	for i, r := range list {
		var f float64
		if err := json.Unmarshal(r, &f); err != nil || f != math.Trunc(f) || f < 0 || f > math.MaxUint32 {
			return nil, fmt.Errorf("%w: prompt[%d]: %s is not a token id", ErrBadRequest, i, r)
		}
		ids[i] = uint32(f)
	}
	return ids, nil
}

// tokenArray parses a JSON array of plain non-negative integers below 2^32
// ("[1, 2, 3]"), the common shape of a token prompt, without the generic
// decoder's allocation per element. Anything else reports false, for the
// generic path to parse or explain.
func tokenArray(raw []byte) ([]uint32, bool) {
	if len(raw) < 2 || raw[0] != '[' || raw[len(raw)-1] != ']' {
		return nil, false
	}
	ids := make([]uint32, 0, len(raw)/4)
	i, n := 1, len(raw)-1
	skip := func() {
		for i < n && (raw[i] == ' ' || raw[i] == '\n' || raw[i] == '\t' || raw[i] == '\r') {
			i++
		}
	}
	skip()
	if i == n {
		return nil, false // empty: the generic path says so
	}
	for {
		start := i
		var v uint64
		for i < n && '0' <= raw[i] && raw[i] <= '9' {
			v = v*10 + uint64(raw[i]-'0')
			if v > math.MaxUint32 {
				return nil, false
			}
			i++
		}
		if i == start || (raw[start] == '0' && i-start > 1) {
			return nil, false
		}
		ids = append(ids, uint32(v))
		skip()
		if i == n {
			return ids, true
		}
		if raw[i] != ',' {
			return nil, false
		}
		i++
		skip()
	}
}
