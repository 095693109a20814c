package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/block"
)

func newKeysCmd() *cobra.Command {
	var (
		namespace  string
		blockSize  int
		tokensFile string
	)
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Print the chained block keys of a token sequence",
		Long: `Print one 64-hex block key per full block of tokens, in order.

Tokens are non-negative integers below 2^32, separated by whitespace or commas,
read from --tokens-file or standard input. A trailing partial block has no key.`,
		Example: `  echo 1 2 3 ... | yuebing keys --namespace acme/llama-3-70b --block-size 16`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if namespace == "" {
				return usageErrorf("--namespace is required (tenant/model or tenant/model#salt)")
			}
			if err := block.ValidateNamespace(namespace); err != nil {
				return usageErrorf("--namespace: %v", err)
			}
			if err := block.ValidateBlockSize(blockSize); err != nil {
				return usageErrorf("--block-size: %v", err)
			}
			var in io.Reader = cmd.InOrStdin()
			if tokensFile != "" && tokensFile != "-" {
				f, err := os.Open(tokensFile)
				if err != nil {
					return usageErrorf("--tokens-file: %v", err)
				}
				defer f.Close()
				in = f
			}
			tokens, err := block.ParseTokens(in)
			if err != nil {
				return err
			}
			keys, err := block.ChainKeys(namespace, blockSize, tokens)
			if err != nil {
				return err
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			for _, k := range keys {
				fmt.Fprintln(w, k)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&namespace, "namespace", "", "namespace the keys belong to: tenant/model[#salt] (required)")
	cmd.Flags().IntVar(&blockSize, "block-size", block.DefaultBlockSize, fmt.Sprintf("tokens per block (%d-%d)", block.MinBlockSize, block.MaxBlockSize))
	cmd.Flags().StringVar(&tokensFile, "tokens-file", "", "file of token ids (default: standard input)")
	return cmd
}
