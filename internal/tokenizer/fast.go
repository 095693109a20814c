package tokenizer

import (
	"math"
	"sync"
	"unicode"
	"unicode/utf8"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// cl100k is a faster encoder of cl100k_base with the same output as
// tiktoken-go's EncodeOrdinary: a hand-written scanner in place of the
// split pattern
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// (matched the way regexp2 does it: on runes, \s as unicode.IsSpace,
// \p{L} and \p{N} as Go's tables, (?i) by unicode.ToLower) and a BPE
// merge over the same ranks.
type cl100k struct {
	ranks map[string]int
}

const cl100kURL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"

var (
	cl100kOnce sync.Once
	cl100kEnc  *cl100k
	cl100kErr  error
)

// loadCl100k returns the shared cl100k encoder, reading the ranks from
// the offline loader tiktoken-go uses.
func loadCl100k() (*cl100k, error) {
	cl100kOnce.Do(func() {
		ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(cl100kURL)
		if err != nil {
			cl100kErr = err
			return
		}
		cl100kEnc = &cl100k{ranks: ranks}
	})
	return cl100kEnc, cl100kErr
}

// Character classes of the split pattern.
const (
	clOther  = iota // none of the below: [^\s\p{L}\p{N}]
	clLetter        // \p{L}
	clNumber        // \p{N}
	clSpace         // \s
)

// asciiClass classifies the ASCII bytes.
var asciiClass = func() (t [128]uint8) {
	for c := range t {
		r := rune(c)
		switch {
		case unicode.IsLetter(r):
			t[c] = clLetter
		case unicode.IsNumber(r):
			t[c] = clNumber
		case unicode.IsSpace(r):
			t[c] = clSpace
		}
	}
	return t
}()

func classOf(r rune) uint8 {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	switch {
	case unicode.IsLetter(r):
		return clLetter
	case unicode.IsNumber(r):
		return clNumber
	case unicode.IsSpace(r):
		return clSpace
	}
	return clOther
}

// at decodes the rune at s[i] (s is valid UTF-8) and its class.
func at(s string, i int) (r rune, size int, class uint8) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, size = utf8.DecodeRuneInString(s[i:])
	return r, size, classOf(r)
}

func lower(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	return unicode.ToLower(r)
}

// contraction returns the length of the contraction ('s, 't, 're, 've,
// 'm, 'll, 'd, any case) at s[i:], or 0.
func contraction(s string, i int) int {
	r, n, _ := at(s, i)
	if lower(r) != '\'' || i+n >= len(s) {
		return 0
	}
	j := i + n
	a, an, _ := at(s, j)
	switch lower(a) {
	case 's', 't', 'm', 'd':
		return j + an - i
	case 'r', 'v', 'l':
		if j+an >= len(s) {
			return 0
		}
		b, bn, _ := at(s, j+an)
		want := rune('e')
		if lower(a) == 'l' {
			want = 'l'
		}
		if lower(b) == want {
			return j + an + bn - i
		}
	}
	return 0
}

// nextPiece returns the length of the pre-token at the start of s (s is
// valid UTF-8 and not empty).
func nextPiece(s string) int {
	if k := contraction(s, 0); k > 0 {
		return k
	}
	r0, n0, c0 := at(s, 0)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	start := -1
	if c0 == clLetter {
		start = 0
	} else if c0 != clNumber && r0 != '\r' && r0 != '\n' && n0 < len(s) {
		if _, _, c1 := at(s, n0); c1 == clLetter {
			start = n0
		}
	}
	if start >= 0 {
		i := start
		for i < len(s) {
			_, n, c := at(s, i)
			if c != clLetter {
				break
			}
			i += n
		}
		return i
	}
	// \p{N}{1,3}
	if c0 == clNumber {
		i := n0
		for k := 1; k < 3 && i < len(s); k++ {
			_, n, c := at(s, i)
			if c != clNumber {
				break
			}
			i += n
		}
		return i
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	first := -1
	if c0 == clOther {
		first = 0
	} else if r0 == ' ' && n0 < len(s) {
		if _, _, c1 := at(s, n0); c1 == clOther {
			first = n0
		}
	}
	if first >= 0 {
		i := first
		for i < len(s) {
			_, n, c := at(s, i)
			if c != clOther {
				break
			}
			i += n
		}
		for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
			i++
		}
		return i
	}
	// c0 is clSpace. The whitespace run s[:end], and the end of its last
	// \r or \n.
	end, lastNL, prev := 0, -1, 0
	for end < len(s) {
		r, n, c := at(s, end)
		if c != clSpace {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = end + n
		}
		prev = end
		end += n
	}
	// \s*[\r\n]+
	if lastNL > 0 {
		return lastNL
	}
	// \s+(?!\S), then \s+
	if end == len(s) || prev == 0 {
		return end
	}
	return prev
}

// appendEncode appends the ids of text (as tiktoken-go's EncodeOrdinary
// would return them) to dst.
func (e *cl100k) appendEncode(dst []uint32, text string) []uint32 {
	if !utf8.ValidString(text) {
		// regexp2 matches runes: each invalid byte is U+FFFD.
		text = string([]rune(text))
	}
	for len(text) > 0 {
		n := nextPiece(text)
		piece := text[:n]
		text = text[n:]
		if id, ok := e.ranks[piece]; ok {
			dst = append(dst, uint32(id))
			continue
		}
		dst = e.merge(dst, piece)
	}
	return dst
}

// merge appends the BPE of piece: repeatedly join the adjacent pair whose
// bytes rank lowest, the leftmost on ties, until no pair has a rank.
func (e *cl100k) merge(dst []uint32, piece string) []uint32 {
	type part struct{ start, rank int }
	var buf [64]part
	var parts []part
	if len(piece)+1 <= len(buf) {
		parts = buf[:len(piece)+1]
	} else {
		parts = make([]part, len(piece)+1)
	}
	rank := func(i, skip int) int {
		if i+skip+2 < len(parts) {
			if r, ok := e.ranks[piece[parts[i].start:parts[i+skip+2].start]]; ok {
				return r
			}
		}
		return math.MaxInt
	}
	for i := range parts {
		parts[i] = part{i, math.MaxInt}
	}
	for i := 0; i+2 < len(parts); i++ {
		parts[i].rank = rank(i, 0)
	}
	for len(parts) > 1 {
		best, j := math.MaxInt, -1
		for i := 0; i+1 < len(parts); i++ {
			if parts[i].rank < best {
				best, j = parts[i].rank, i
			}
		}
		if j < 0 {
			break
		}
		parts[j].rank = rank(j, 1)
		if j > 0 {
			parts[j-1].rank = rank(j-1, 1)
		}
		parts = append(parts[:j+1], parts[j+2:]...)
	}
	for i := 0; i+1 < len(parts); i++ {
		dst = append(dst, uint32(e.ranks[piece[parts[i].start:parts[i+1].start]]))
	}
	return dst
}
