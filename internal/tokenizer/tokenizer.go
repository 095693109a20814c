// Package tokenizer turns prompts into token ids the way yuebing's engine
// simulator does: an offline BPE (tiktoken's encodings, ranks built into
// the binary) and one documented chat template. The router uses it as its
// local tokenizer and the simulator as its own, so both key a prompt with
// the same ids; a router in front of another engine asks that engine
// (router.Options.Tokenize).
//
//	tok, _ := tokenizer.New("cl100k_base")
//	ids := tok.Encode("hello world")
//	chat, _ := tokenizer.ReadChat(msgs, true)
//	ids, _, _ := tok.EncodeChat(chat, nil)
package tokenizer

import (
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// ErrEncoding reports an encoding that is not built in.
var ErrEncoding = errors.New("tokenizer: unknown encoding")

// Encodings are the BPE encodings whose ranks ship inside the binary.
var Encodings = []string{"cl100k_base", "o200k_base", "p50k_base", "r50k_base"}

// Known reports whether encoding is one of Encodings.
func Known(encoding string) bool {
	for _, e := range Encodings {
		if e == encoding {
			return true
		}
	}
	return false
}

// loaderOnce installs the offline loader: nothing may download a
// vocabulary at run time.
var loaderOnce sync.Once

// Tokenizer turns text into token ids. It is safe for concurrent use.
type Tokenizer struct {
	name string
	enc  *tiktoken.Tiktoken
	fast *cl100k // cl100k_base's own encoder; nil for the others
}

// New loads a BPE encoding from the ranks built into the binary.
func New(encoding string) (*Tokenizer, error) {
	if !Known(encoding) {
		return nil, fmt.Errorf("%w: %q", ErrEncoding, encoding)
	}
	loaderOnce.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
	enc, err := tiktoken.GetEncoding(encoding)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrEncoding, encoding, err)
	}
	t := &Tokenizer{name: encoding, enc: enc}
	if encoding == "cl100k_base" {
		if t.fast, err = loadCl100k(); err != nil {
			return nil, fmt.Errorf("%w: %q: %w", ErrEncoding, encoding, err)
		}
	}
	return t, nil
}

// Name returns the encoding's name.
func (t *Tokenizer) Name() string { return t.name }

// maxChunk bounds the text encoded at once. BPE merging is quadratic in
// the length of a pre-token (40,000 letters take seconds), so a prompt of
// one endless word would stall a server; chunks cap that cost at about a
// millisecond each.
const maxChunk = 1024

// Encode returns text's token ids. Special tokens' text is encoded as
// ordinary text: a prompt cannot smuggle in control tokens. Text is encoded
// in chunks of at most maxChunk bytes, cut before whitespace where there is
// some, so ordinary text encodes as it would whole, and the same text (or
// prefix) always encodes the same way.
func (t *Tokenizer) Encode(text string) []uint32 {
	return t.AppendEncode(make([]uint32, 0, len(text)/4+1), text)
}

// AppendEncode appends text's token ids (Encode) to dst.
func (t *Tokenizer) AppendEncode(dst []uint32, text string) []uint32 {
	for len(text) > 0 {
		n := chunkLen(text)
		if t.fast != nil {
			dst = t.fast.appendEncode(dst, text[:n])
			text = text[n:]
			continue
		}
		for _, id := range t.enc.EncodeOrdinary(text[:n]) {
			dst = append(dst, uint32(id))
		}
		text = text[n:]
	}
	return dst
}

// chunkLen returns the length of text's next chunk: all of it when short,
// else up to the last whitespace byte past the first in maxChunk bytes, else
// maxChunk bytes backed off to a UTF-8 boundary.
func chunkLen(text string) int {
	if len(text) <= maxChunk {
		return len(text)
	}
	for i := maxChunk; i > 0; i-- {
		if c := text[i]; c == ' ' || c == '\n' || c == '\t' || c == '\r' {
			return i
		}
	}
	n := maxChunk
	for n > 1 && !utf8.RuneStart(text[n]) {
		n--
	}
	return n
}
