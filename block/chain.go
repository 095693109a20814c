package block

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Block sizes, in tokens.
const (
	MinBlockSize     = 16
	MaxBlockSize     = 1024
	DefaultBlockSize = 256
)

// keyDomain separates yuebing's chained keys from any other SHA-256 use; the
// version lets a future derivation coexist with this one.
const keyDomain = "yuebing/v1"

// Namespace limits, in bytes. They keep keys and log lines bounded; real
// tenant and model names are far shorter.
const (
	maxTenantLen = 64
	maxModelLen  = 256
	maxSaltLen   = 256
)

// ValidateNamespace checks that ns has the form "tenant/model" optionally
// followed by "#salt". The tenant is 1-64 characters of [A-Za-z0-9._-]; the
// model (which may itself contain '/', as in "meta-llama/Llama-3-70B") is 1-256
// printable ASCII characters other than '#'; the salt is up to 256 printable
// ASCII characters. Spaces and control characters are not allowed anywhere.
func ValidateNamespace(ns string) error {
	tenant, rest, ok := strings.Cut(ns, "/")
	if !ok {
		return fmt.Errorf("%w %q: want \"tenant/model\" or \"tenant/model#salt\"", ErrInvalidNamespace, ns)
	}
	model, salt, hasSalt := strings.Cut(rest, "#")
	switch {
	case tenant == "":
		return fmt.Errorf("%w %q: empty tenant", ErrInvalidNamespace, ns)
	case len(tenant) > maxTenantLen:
		return fmt.Errorf("%w %q: tenant longer than %d bytes", ErrInvalidNamespace, ns, maxTenantLen)
	case model == "":
		return fmt.Errorf("%w %q: empty model", ErrInvalidNamespace, ns)
	case len(model) > maxModelLen:
		return fmt.Errorf("%w %q: model longer than %d bytes", ErrInvalidNamespace, ns, maxModelLen)
	case hasSalt && salt == "":
		return fmt.Errorf("%w %q: empty salt after '#'", ErrInvalidNamespace, ns)
	case len(salt) > maxSaltLen:
		return fmt.Errorf("%w %q: salt longer than %d bytes", ErrInvalidNamespace, ns, maxSaltLen)
	}
	for i := 0; i < len(tenant); i++ {
		if c := tenant[i]; !isTenantChar(c) {
			return fmt.Errorf("%w %q: tenant character %q at position %d is not one of [A-Za-z0-9._-]", ErrInvalidNamespace, ns, c, i)
		}
	}
	for i := len(tenant) + 1; i < len(ns); i++ {
		if c := ns[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w %q: character %q at position %d is not printable ASCII", ErrInvalidNamespace, ns, c, i)
		}
	}
	return nil
}

// Tenant returns the tenant part of a valid namespace.
func Tenant(ns string) string {
	t, _, _ := strings.Cut(ns, "/")
	return t
}

func isTenantChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// ValidateBlockSize checks that n is within [MinBlockSize, MaxBlockSize].
func ValidateBlockSize(n int) error {
	if n < MinBlockSize || n > MaxBlockSize {
		return fmt.Errorf("%w %d: want %d to %d tokens", ErrInvalidBlockSize, n, MinBlockSize, MaxBlockSize)
	}
	return nil
}

// Root returns the chain root of a namespace and block size:
// SHA-256("yuebing/v1" || 0x00 || namespace || 0x00 || decimal(blockSize)).
// Arguments are not validated; see ChainKeys.
func Root(namespace string, blockSize int) Key {
	h := sha256.New()
	h.Write([]byte(keyDomain))
	h.Write([]byte{0})
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(blockSize)))
	var k Key
	h.Sum(k[:0])
	return k
}

// ChainKeys returns the chained key of every full block of tokens, in order:
// key[0] = SHA-256(root || block 0's tokens as little-endian uint32) and
// key[i] = SHA-256(key[i-1] || block i's tokens). A trailing partial block
// gets no key. It validates the namespace and block size.
func ChainKeys(namespace string, blockSize int, tokens []uint32) ([]Key, error) {
	c, err := NewChain(namespace, blockSize)
	if err != nil {
		return nil, err
	}
	keys := make([]Key, 0, len(tokens)/blockSize)
	for len(tokens) >= blockSize {
		keys = append(keys, c.Next(tokens[:blockSize]))
		tokens = tokens[blockSize:]
	}
	return keys, nil
}

// Chain derives chained keys one block at a time, for callers that stream
// tokens. A Chain is not safe for concurrent use.
type Chain struct {
	blockSize int
	prev      Key
	// buf is the previous key and a block's tokens, hashed in one call:
	// a streaming hash's Reset, Writes and Sum cost more than the hashing
	// of a 16-token block.
	buf []byte
}

// NewChain starts a chain for namespace and blockSize, validating both.
func NewChain(namespace string, blockSize int) (*Chain, error) {
	if err := ValidateNamespace(namespace); err != nil {
		return nil, err
	}
	if err := ValidateBlockSize(blockSize); err != nil {
		return nil, err
	}
	return &Chain{
		blockSize: blockSize,
		prev:      Root(namespace, blockSize),
		buf:       make([]byte, len(Key{})+4*blockSize),
	}, nil
}

// Resume makes prev the key the next block chains from, as if the chain
// had just returned it: the key of a block a peer already keyed.
func (c *Chain) Resume(prev Key) { c.prev = prev }

// BlockSize returns the chain's block size in tokens.
func (c *Chain) BlockSize() int { return c.blockSize }

// Next returns the key of the next block. It panics unless len(tokens) is
// exactly the block size: keying a partial block is a caller bug.
func (c *Chain) Next(tokens []uint32) Key {
	if len(tokens) != c.blockSize {
		panic(fmt.Sprintf("BUG: block.Chain.Next with %d tokens, block size is %d", len(tokens), c.blockSize))
	}
	n := copy(c.buf, c.prev[:])
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(c.buf[n+4*i:], t)
	}
	c.prev = sha256.Sum256(c.buf)
	return c.prev
}

// OpaqueKey keys a client-chosen identifier: SHA-256(namespace || 0x00 || raw).
// A list of opaque keys in order is treated as a chain for prefix matching.
func OpaqueKey(namespace string, raw []byte) Key {
	h := sha256.New()
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write(raw)
	var k Key
	h.Sum(k[:0])
	return k
}
