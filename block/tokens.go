package block

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// maxTokenText bounds how much of a bad token an error quotes and how much a
// token may span: 2^32-1 has 10 digits, so anything longer is invalid anyway.
const maxTokenText = 24

// TokenError describes a token that could not be parsed. Index is the 1-based
// position of the token in the input, Offset the byte offset where it starts.
type TokenError struct {
	Index  int
	Offset int64
	Text   string // the token as written, truncated to a few dozen bytes
	Reason string
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("block: invalid token %d %q at byte %d: %s", e.Index, e.Text, e.Offset, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidToken) hold.
func (e *TokenError) Unwrap() error { return ErrInvalidToken }

// ParseTokens reads token ids separated by whitespace and/or single commas
// ("1 2 3", "1,2,3", "1, 2,\n3"). Each must be a decimal integer in [0, 2^32).
// Two commas with no token between them are an error, as is any other byte.
// The input is streamed; memory grows only with the number of tokens.
func ParseTokens(r io.Reader) ([]uint32, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		tokens  []uint32
		tok     []byte
		start   int64
		off     int64
		comma   bool // a comma was seen since the last token
		sawTok  bool
		tokDone = func() error {
			if len(tok) == 0 {
				return nil
			}
			idx := len(tokens) + 1
			text := string(tok)
			if len(tok) > maxTokenText {
				text = string(tok[:maxTokenText]) + "..."
			}
			v, err := strconv.ParseUint(string(tok), 10, 32)
			if err != nil {
				reason := "not a non-negative integer"
				if errors.Is(err, strconv.ErrRange) {
					reason = "out of range, tokens are < 4294967296"
				} else if len(tok) > 0 && tok[0] == '+' {
					reason = "a sign is not allowed"
				}
				return &TokenError{Index: idx, Offset: start, Text: text, Reason: reason}
			}
			tokens = append(tokens, uint32(v))
			tok = tok[:0]
			comma = false
			sawTok = true
			return nil
		}
	)
	for {
		c, err := br.ReadByte()
		if err == io.EOF {
			if err := tokDone(); err != nil {
				return nil, err
			}
			return tokens, nil
		}
		if err != nil {
			return nil, fmt.Errorf("block: reading tokens: %w", err)
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if err := tokDone(); err != nil {
				return nil, err
			}
		case c == ',':
			if err := tokDone(); err != nil {
				return nil, err
			}
			if comma || !sawTok {
				return nil, &TokenError{Index: len(tokens) + 1, Offset: off, Text: ",", Reason: "empty token before this comma"}
			}
			comma = true
		default:
			if len(tok) == 0 {
				start = off
			}
			if len(tok) <= maxTokenText {
				tok = append(tok, c)
			} else if c >= '0' && c <= '9' {
				// Keep one digit past the limit so ParseUint reports a range error.
			} else {
				return nil, &TokenError{Index: len(tokens) + 1, Offset: start, Text: string(tok[:maxTokenText]) + "...", Reason: "not a non-negative integer"}
			}
		}
		off++
	}
}

// FormatTokens writes tokens space-separated, the inverse of ParseTokens.
func FormatTokens(tokens []uint32) string {
	b := make([]byte, 0, len(tokens)*6)
	for i, t := range tokens {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendUint(b, uint64(t), 10)
	}
	return string(b)
}
