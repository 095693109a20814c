package router

import (
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// encodings are the BPE encodings whose ranks ship inside the binary.
var encodings = map[string]bool{"cl100k_base": true, "o200k_base": true, "p50k_base": true, "r50k_base": true}

// loaderOnce installs the offline loader: the router must never download
// a vocabulary at run time.
var loaderOnce sync.Once

// Tokenizer turns text prompts into token ids. It is safe for concurrent use.
type Tokenizer struct {
	enc *tiktoken.Tiktoken
}

// NewTokenizer loads a BPE encoding from the ranks built into the binary.
func NewTokenizer(encoding string) (*Tokenizer, error) {
	if !encodings[encoding] {
		return nil, fmt.Errorf("%w: encoding %q", ErrOptions, encoding)
	}
	loaderOnce.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
	enc, err := tiktoken.GetEncoding(encoding)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding %q: %w", ErrOptions, encoding, err)
	}
	return &Tokenizer{enc: enc}, nil
}

// maxChunk bounds the text encoded at once. BPE merging is quadratic in
// the length of a pre-token (40,000 letters take seconds), so a prompt of
// one endless word would stall the router; chunks cap that cost at about
// a millisecond each.
const maxChunk = 1024

// Encode returns text's token ids. Special tokens' text is encoded as
// ordinary text: a prompt cannot smuggle in control tokens. Text is encoded
// in chunks of at most maxChunk bytes, cut before whitespace where there is
// some, so ordinary text encodes as it would whole, and the same text (or
// prefix) always encodes the same way.
func (t *Tokenizer) Encode(text string) []uint32 {
	out := make([]uint32, 0, len(text)/4+1)
	for len(text) > 0 {
		n := chunkLen(text)
		for _, id := range t.enc.EncodeOrdinary(text[:n]) {
			out = append(out, uint32(id))
		}
		text = text[n:]
	}
	return out
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
