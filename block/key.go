package block

import (
	"encoding/hex"
	"fmt"
)

// KeySize is the length of a Key in bytes.
const KeySize = 32

// Key names a block: a SHA-256 digest, either of a chained prefix (see
// ChainKeys) or of an opaque client identifier (see OpaqueKey).
//
// Key is a comparable value type; use it directly as a map key.
type Key [KeySize]byte

// String returns the canonical text form: 64 lowercase hex characters.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// IsZero reports whether k is the zero key, which no hash produces in practice
// and which the package uses to mean "no key".
func (k Key) IsZero() bool { return k == Key{} }

// MarshalText implements encoding.TextMarshaler with the canonical text form.
func (k Key) MarshalText() ([]byte, error) {
	b := make([]byte, 2*KeySize)
	hex.Encode(b, k[:])
	return b, nil
}

// UnmarshalText implements encoding.TextUnmarshaler; see ParseKey.
func (k *Key) UnmarshalText(text []byte) error {
	parsed, err := parseKey(text)
	if err != nil {
		return err
	}
	*k = parsed
	return nil
}

// ParseKey parses the canonical text form of a key: exactly 64 lowercase hex
// characters. The error says what is wrong (length, or which character at
// which position) and wraps ErrInvalidKey.
func ParseKey(s string) (Key, error) { return parseKey([]byte(s)) }

func parseKey(s []byte) (Key, error) {
	var k Key
	if len(s) != 2*KeySize {
		return k, fmt.Errorf("%w: got %d characters, want %d lowercase hex characters", ErrInvalidKey, len(s), 2*KeySize)
	}
	for i, c := range s {
		switch {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			return k, fmt.Errorf("%w: uppercase hex %q at position %d; keys are lowercase", ErrInvalidKey, c, i)
		default:
			return k, fmt.Errorf("%w: %q at position %d is not a hex digit", ErrInvalidKey, c, i)
		}
	}
	if _, err := hex.Decode(k[:], s); err != nil {
		panic("BUG: validated hex failed to decode: " + err.Error())
	}
	return k, nil
}
