// Package auth maps bearer tokens to principals: which tenant a caller is
// and whether it is an administrator. The HTTP API and the Redis front end
// share it, so a token means the same thing on both.
//
// Tokens come from a YAML file mapping each token to its tenant and role:
//
//	tokA: {tenant: alpha, role: tenant}
//	tokB: {tenant: beta, role: tenant}
//	ops-secret: {tenant: ops, role: admin}
//
// A tenant may use only namespaces of its own tenant ("alpha/..."); an admin
// may use every namespace and the administrative operations.
package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/yuebing/yuebing/block"
)

// Roles.
const (
	RoleAdmin  = "admin"
	RoleTenant = "tenant"
)

// MinTokenLength is the shortest token accepted; shorter ones are guessable.
const MinTokenLength = 16

var (
	// ErrUnauthenticated: no token, or one that is not known.
	ErrUnauthenticated = errors.New("auth: missing or unknown token")
	// ErrForbidden: a known token that may not do this.
	ErrForbidden = errors.New("auth: forbidden")
	// ErrThrottled: the caller's address failed to authenticate too often
	// and is refused for a while (ThrottleOptions); see ThrottledError.
	ErrThrottled = errors.New("auth: too many failed authentications")
)

// Principal is an authenticated caller.
type Principal struct {
	Tenant string
	Role   string
}

// IsAdmin reports whether p may use every namespace and admin operations.
func (p Principal) IsAdmin() bool { return p.Role == RoleAdmin }

// CanAccess reports whether p may read and write namespace ns.
func (p Principal) CanAccess(ns string) bool {
	return p.IsAdmin() || block.Tenant(ns) == p.Tenant
}

// Authorize returns nil if p may use ns and an error wrapping ErrForbidden
// that names the namespace otherwise.
func (p Principal) Authorize(ns string) error {
	if p.CanAccess(ns) {
		return nil
	}
	return fmt.Errorf("%w: tenant %q may not use namespace %q", ErrForbidden, p.Tenant, ns)
}

// Open is the principal of every caller when authentication is off: an admin
// of the default tenant.
var Open = Principal{Tenant: DefaultTenant, Role: RoleAdmin}

// DefaultTenant is the tenant of callers when authentication is off.
const DefaultTenant = "default"

// Tokens is a set of known tokens. A nil *Tokens means authentication is
// off. It is safe for concurrent use (the set is immutable; its Throttle
// is safe for concurrent use).
type Tokens struct {
	// Keyed by the token's SHA-256, so the map never holds a secret and a
	// lookup's timing says nothing about how much of a token matched.
	byHash map[[32]byte]Principal
	// throttle limits failures per source for AuthenticateFrom; every
	// front end given these tokens shares it.
	throttle *Throttle
}

type entry struct {
	Tenant string `yaml:"tenant"`
	Role   string `yaml:"role"`
}

// Load reads a tokens file.
func Load(path string) (*Tokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: reading tokens file: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("auth: %s: %w", path, err)
	}
	return t, nil
}

// Parse reads tokens from YAML. Every problem is reported, each naming the
// entry by its line, never by the secret itself.
func Parse(data []byte) (*Tokens, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, errors.New("not valid YAML") // the parser's message may quote a token
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("no tokens: the file must map at least one token to {tenant, role}")
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping of token to {tenant, role}", m.Line)
	}
	if len(m.Content) == 0 {
		return nil, errors.New("no tokens: the file must map at least one token to {tenant, role}")
	}
	t := &Tokens{byHash: make(map[[32]byte]Principal, len(m.Content)/2), throttle: defaultThrottle()}
	seen := map[[32]byte]int{}
	var errs []error
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		where := fmt.Sprintf("line %d", k.Line)
		if k.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("%s: a token must be a string", where))
			continue
		}
		tok := k.Value
		var e entry
		if err := v.Decode(&e); err != nil || v.Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf("%s: want {tenant: NAME, role: admin|tenant}", where))
			continue
		}
		h := sha256.Sum256([]byte(tok))
		if first, dup := seen[h]; dup {
			errs = append(errs, fmt.Errorf("%s: the same token is already defined on line %d", where, first))
			continue
		}
		seen[h] = k.Line
		switch {
		case len(tok) < MinTokenLength:
			errs = append(errs, fmt.Errorf("%s: tokens must be at least %d characters", where, MinTokenLength))
		case strings.ContainsAny(tok, " \t\r\n"):
			errs = append(errs, fmt.Errorf("%s: tokens must not contain whitespace", where))
		}
		if err := block.ValidateNamespace(e.Tenant + "/x"); err != nil || e.Tenant == "" {
			errs = append(errs, fmt.Errorf("%s: tenant %q must be 1-64 characters of [A-Za-z0-9._-]", where, e.Tenant))
		}
		if e.Role != RoleAdmin && e.Role != RoleTenant {
			errs = append(errs, fmt.Errorf("%s: role %q: want %q or %q", where, e.Role, RoleAdmin, RoleTenant))
		}
		t.byHash[h] = Principal(e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return t, nil
}

// Enabled reports whether authentication is on.
func (t *Tokens) Enabled() bool { return t != nil }

// Len returns the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.byHash)
}

// Authenticate returns the principal of token. With authentication off every
// caller is Open.
func (t *Tokens) Authenticate(token string) (Principal, error) {
	if t == nil {
		return Open, nil
	}
	if token == "" {
		return Principal{}, ErrUnauthenticated
	}
	p, ok := t.byHash[sha256.Sum256([]byte(token))]
	if !ok {
		return Principal{}, ErrUnauthenticated
	}
	return p, nil
}
