package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/yuebing/yuebing/block"
)

// KeysOptions configure WriteKeys, `yuebing keys`: the chained block keys
// of a token sequence, as a node and its clients compute them.
type KeysOptions struct {
	// Namespace is tenant/model[#salt] (--namespace). Required.
	Namespace string
	// BlockSize is tokens per block (--block-size). Default
	// block.DefaultBlockSize.
	BlockSize int
	// TokensFile holds the token ids (--tokens-file); "" or "-" reads
	// WriteKeys' input instead.
	TokensFile string
}

// BindKeysFlags binds the flags of `yuebing keys` to o's fields.
func BindKeysFlags(f *pflag.FlagSet, o *KeysOptions) {
	f.StringVar(&o.Namespace, "namespace", "", "namespace the keys belong to: tenant/model[#salt] (required)")
	f.IntVar(&o.BlockSize, "block-size", block.DefaultBlockSize, fmt.Sprintf("tokens per block (%d-%d)", block.MinBlockSize, block.MaxBlockSize))
	f.StringVar(&o.TokensFile, "tokens-file", "", "file of token ids (default: standard input)")
}

// Validate reports every problem at once, each naming its flag and
// wrapping ErrInvalidConfig.
func (o *KeysOptions) Validate() error {
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, fmt.Errorf("%w: --namespace is required (tenant/model or tenant/model#salt)", ErrInvalidConfig))
	} else if err := block.ValidateNamespace(o.Namespace); err != nil {
		errs = append(errs, fmt.Errorf("%w: --namespace: %v", ErrInvalidConfig, err))
	}
	if err := block.ValidateBlockSize(o.BlockSize); err != nil {
		errs = append(errs, fmt.Errorf("%w: --block-size: %v", ErrInvalidConfig, err))
	}
	return errors.Join(errs...)
}

// WriteKeys writes one 64-hex key per full block of the tokens read from
// o.TokensFile, or from in, one a line; a trailing partial block has none.
func WriteKeys(w io.Writer, in io.Reader, o KeysOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.TokensFile != "" && o.TokensFile != "-" {
		f, err := os.Open(o.TokensFile)
		if err != nil {
			return fmt.Errorf("%w: --tokens-file: %v", ErrInvalidConfig, err)
		}
		defer f.Close()
		in = f
	}
	tokens, err := block.ParseTokens(in)
	if err != nil {
		return err
	}
	keys, err := block.ChainKeys(o.Namespace, o.BlockSize, tokens)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for _, k := range keys {
		fmt.Fprintln(bw, k)
	}
	return bw.Flush()
}
