// Package openai holds what yuebing's OpenAI-compatible front ends (the
// router and the engine simulator) share: how a chat's messages read as
// one text, so that both key a conversation the same way and its next turn
// extends the previous one's prompt.
package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Message is a chat message as requests carry it.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// ErrMessages reports messages that cannot be read as text.
var ErrMessages = errors.New("openai: bad messages")

// RenderChat renders messages as "<|role|>\ncontent\n" each. Content is a
// string, a list of parts of which the text ones count, or null (an
// assistant turn with tool calls only). There must be at least one
// message, each with a role.
func RenderChat(msgs []Message) (string, error) {
	if len(msgs) == 0 {
		return "", fmt.Errorf("%w: messages: want at least one message", ErrMessages)
	}
	var b strings.Builder
	for i, m := range msgs {
		text, err := ContentText(m.Content)
		if err != nil {
			return "", fmt.Errorf("%w: messages[%d].content: %w", ErrMessages, i, err)
		}
		if m.Role == "" {
			return "", fmt.Errorf("%w: messages[%d]: empty role", ErrMessages, i)
		}
		b.WriteString("<|" + m.Role + "|>\n")
		b.WriteString(text)
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// ContentText returns a message content's text: a string, or the text
// parts of a content array.
func ContentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("want a string or an array of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}
