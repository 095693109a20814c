package enginesim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/yuebing/yuebing/internal/openai"
	"github.com/yuebing/yuebing/internal/tokenizer"
)

// encodeText tokenizes a text prompt within Options.MaxPromptBytes.
func (e *Engine) encodeText(s string) ([]uint32, error) {
	if len(s) > e.opts.MaxPromptBytes {
		return nil, fmt.Errorf("%w: prompt of %d bytes of text, limit %d", ErrInvalid, len(s), e.opts.MaxPromptBytes)
	}
	return e.tok.Encode(s), nil
}

// chatPrompt renders a chat's messages with the yuebing-chat-v1 template
// (internal/tokenizer), with an open assistant turn when gen is set, and
// tokenizes them, each message's ids cached: a conversation's next turn
// encodes only its new messages, and its ids extend the previous turn's,
// so it hits the prefix cache.
func (e *Engine) chatPrompt(raw json.RawMessage, gen bool) ([]uint32, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, fmt.Errorf("%w: messages is required", ErrInvalid)
	}
	var msgs []openai.Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, fmt.Errorf("%w: messages must be a list of {role, content}: %v", ErrInvalid, err)
	}
	c, err := tokenizer.ReadChat(msgs, gen)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Bytes > e.opts.MaxPromptBytes {
		return nil, fmt.Errorf("%w: messages of %d bytes of text, limit %d", ErrInvalid, c.Bytes, e.opts.MaxPromptBytes)
	}
	ids, _, _ := e.tok.EncodeChat(c, e.chats)
	return ids, nil
}

// tokenizeRequest is vLLM's POST /tokenize body: a completion's prompt
// (TokenizeCompletionRequest) or a chat's messages (TokenizeChatRequest).
// Fields the simulator does not read are accepted, as vLLM accepts them.
type tokenizeRequest struct {
	Model                string          `json:"model"`
	Prompt               *string         `json:"prompt"`
	Messages             json.RawMessage `json:"messages"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ContinueFinalMessage bool            `json:"continue_final_message"`
	// AddSpecialTokens changes nothing: the simulator's encodings have no
	// beginning-of-sequence token to add.
	AddSpecialTokens *bool `json:"add_special_tokens"`
}

// tokenizeResponse is vLLM's TokenizeResponse.
type tokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []uint32 `json:"tokens"`
}

// serveTokenize answers vLLM's POST /tokenize: the ids the engine runs a
// completion's prompt or a chat's messages as (add_generation_prompt, true
// by default as in vLLM, opens the assistant's turn as a chat completion
// does), so a router can key requests with the engine's own ids.
func (e *Engine) serveTokenize(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, errBody("too_large", "invalid_request_error", fmt.Sprintf("request body over %d bytes", maxBody)))
		return
	}
	var req tokenizeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, fmt.Errorf("%w: request body is not a tokenize request: %v", ErrInvalid, err))
		return
	}
	if req.Model != "" && req.Model != e.opts.Model {
		writeJSON(w, http.StatusNotFound, errBody("model_not_found", "invalid_request_error", fmt.Sprintf("model %q: this engine serves %q", req.Model, e.opts.Model)))
		return
	}
	var ids []uint32
	switch {
	case req.Prompt != nil && req.Messages != nil:
		err = fmt.Errorf("%w: give prompt or messages, not both", ErrInvalid)
	case req.Prompt != nil:
		ids, err = e.encodeText(*req.Prompt)
	case req.ContinueFinalMessage:
		err = fmt.Errorf("%w: continue_final_message: the %s template always closes the last message", ErrInvalid, tokenizer.TemplateName)
	default:
		gen := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
		ids, err = e.chatPrompt(req.Messages, gen)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if ids == nil {
		ids = []uint32{}
	}
	writeJSON(w, http.StatusOK, tokenizeResponse{Count: len(ids), MaxModelLen: e.MaxModelLen(), Tokens: ids})
}

// MaxModelLen returns the longest prompt the engine takes: an empty KV
// pool's worth of tokens.
func (e *Engine) MaxModelLen() int { return e.dev.Pages() * e.layout.BlockTokens }
