package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/block"
)

// TestWriteKeys: one key per full block, the chain block.ChainKeys makes,
// and bad options named by their flags.
func TestWriteKeys(t *testing.T) {
	var out strings.Builder
	in := strings.Repeat("7 ", 40)
	if err := WriteKeys(&out, strings.NewReader(in), KeysOptions{Namespace: "acme/m", BlockSize: 16}); err != nil {
		t.Fatal(err)
	}
	tokens, _ := block.ParseTokens(strings.NewReader(in))
	want, _ := block.ChainKeys("acme/m", 16, tokens)
	lines := strings.Fields(out.String())
	if len(lines) != 2 || len(want) != 2 || lines[0] != want[0].String() || lines[1] != want[1].String() {
		t.Fatalf("keys %q, want %v", lines, want)
	}
	err := WriteKeys(&out, strings.NewReader(in), KeysOptions{BlockSize: 3})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "--namespace") || !strings.Contains(err.Error(), "--block-size") {
		t.Fatalf("bad options: %v", err)
	}
}
