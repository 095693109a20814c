package tokenizer

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/yuebing/yuebing/internal/openai"
)

// ErrChat reports messages that cannot be rendered.
var ErrChat = errors.New("tokenizer: bad messages")

// The chat template, "yuebing-chat-v1": each message is the text
// "<|ROLE|>\nCONTENT\n" (openai.ContentText reads the content), encoded on
// its own, and the prompt is the messages' ids one after the other; with
// the generation prompt, the ids of "<|assistant|>\n" follow. Encoding each
// message apart (as tiktoken-based chat formats count tokens per message)
// makes a message's ids independent of its neighbours: a conversation's
// next turn extends its previous prompt's ids exactly, and a message's ids
// can be cached (SegmentCache).
const (
	// TemplateName names the template in /tokenize answers and logs.
	TemplateName = "yuebing-chat-v1"
	// GenerationPrompt opens the assistant's turn.
	GenerationPrompt = "<|assistant|>\n"
)

// RenderMessage returns message m's text under the template.
func RenderMessage(role, content string) string {
	return "<|" + role + "|>\n" + content + "\n"
}

// Chat is a chat's messages read for the template: each message's text,
// in order. It is what EncodeChat encodes and what a cache keys by.
type Chat struct {
	// Segments are the rendered messages.
	Segments []string
	// Bytes is the rendered chat's length, generation prompt included.
	Bytes int
}

// ReadChat renders msgs under the template. There must be at least one
// message, each with a role; content is a string, text parts, or null.
func ReadChat(msgs []openai.Message, addGenerationPrompt bool) (Chat, error) {
	if len(msgs) == 0 {
		return Chat{}, fmt.Errorf("%w: messages: want at least one message", ErrChat)
	}
	c := Chat{Segments: make([]string, 0, len(msgs)+1)}
	for i, m := range msgs {
		if m.Role == "" {
			return Chat{}, fmt.Errorf("%w: messages[%d]: empty role", ErrChat, i)
		}
		text, err := openai.ContentText(m.Content)
		if err != nil {
			return Chat{}, fmt.Errorf("%w: messages[%d].content: %w", ErrChat, i, err)
		}
		s := RenderMessage(m.Role, text)
		c.Segments = append(c.Segments, s)
		c.Bytes += len(s)
	}
	if addGenerationPrompt {
		c.Segments = append(c.Segments, GenerationPrompt)
		c.Bytes += len(GenerationPrompt)
	}
	return c, nil
}

// EncodeChat returns the ids of c under the template. With a cache,
// each segment's ids are looked up first and stored after encoding; hits
// and misses are returned (segments, not tokens).
func (t *Tokenizer) EncodeChat(c Chat, cache *SegmentCache) (ids []uint32, hits, misses int) {
	ids = make([]uint32, 0, c.Bytes/4+1)
	for _, s := range c.Segments {
		if cache == nil {
			ids = t.AppendEncode(ids, s)
			continue
		}
		k := segmentKey(t.name, s)
		if got, ok := cache.Get(k); ok {
			ids = append(ids, got...)
			hits++
			continue
		}
		n := len(ids)
		ids = t.AppendEncode(ids, s)
		cache.Add(k, ids[n:])
		misses++
	}
	return ids, hits, misses
}

// segmentKey names one segment's ids under one encoding.
func segmentKey(encoding, s string) Key {
	h := sha256.New()
	h.Write([]byte(encoding))
	h.Write([]byte{0})
	h.Write([]byte(s))
	var k Key
	h.Sum(k[:0])
	return k
}
