package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `
alpha-token-0123456789: {tenant: alpha, role: tenant}
beta-token-0123456789: {tenant: beta, role: tenant}
admin-token-0123456789: {tenant: ops, role: admin}
`

func TestParseAndAuthenticate(t *testing.T) {
	toks, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if !toks.Enabled() || toks.Len() != 3 {
		t.Fatalf("Enabled=%v Len=%d", toks.Enabled(), toks.Len())
	}
	p, err := toks.Authenticate("alpha-token-0123456789")
	if err != nil || p.Tenant != "alpha" || p.IsAdmin() {
		t.Fatalf("alpha: %+v, %v", p, err)
	}
	if !p.CanAccess("alpha/llama") || p.CanAccess("beta/llama") || p.CanAccess("alphabet/llama") {
		t.Fatal("tenant namespace checks wrong")
	}
	if err := p.Authorize("beta/llama"); !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "beta/llama") {
		t.Fatalf("Authorize = %v", err)
	}
	a, _ := toks.Authenticate("admin-token-0123456789")
	if !a.IsAdmin() || !a.CanAccess("beta/llama") {
		t.Fatal("admin checks wrong")
	}
	for _, bad := range []string{"", "nope", "alpha-token-012345678"} {
		if _, err := toks.Authenticate(bad); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("Authenticate(%q) = %v", bad, err)
		}
	}
}

func TestAuthOff(t *testing.T) {
	var toks *Tokens
	p, err := toks.Authenticate("")
	if err != nil || p != Open || toks.Enabled() {
		t.Fatalf("auth off: %+v, %v", p, err)
	}
}

func TestParseErrors(t *testing.T) {
	f := func(in string, wants ...string) {
		t.Helper()
		_, err := Parse([]byte(in))
		if err == nil {
			t.Fatalf("Parse(%q) succeeded", in)
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Parse(%q) = %v, missing %q", in, err, w)
			}
		}
		if strings.Contains(err.Error(), "shorttok") || strings.Contains(err.Error(), "long-enough") {
			t.Errorf("error reveals a token: %v", err)
		}
	}
	f("", "no tokens")
	f("{}", "no tokens")
	f("[1, 2]", "mapping")
	f("shorttok: {tenant: a, role: tenant}", "line 1", "at least 16")
	f("long-enough-token-1: {tenant: 'a b', role: tenant}", "must be 1-64")
	f("long-enough-token-1: {tenant: a, role: root}", `role "root"`)
	f("long-enough-token-1: 7", "line 1", "want {tenant")
	f("long-enough-token-1: {tenant: a, role: tenant}\nlong-enough-token-1: {tenant: b, role: tenant}", "line 2", "already defined on line 1")
	f("long-enough-token-1: [", "not valid YAML")
}

func TestLoad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens.yaml")
	os.WriteFile(p, []byte(sample), 0o600)
	if _, err := Load(p); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p + ".missing"); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("x: y")
	f.Fuzz(func(t *testing.T, in string) {
		toks, err := Parse([]byte(in))
		if err == nil && toks.Len() == 0 {
			t.Fatal("accepted a file with no tokens")
		}
	})
}
