package main

import (
	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/server"
)

func newKeysCmd() *cobra.Command {
	var o server.KeysOptions
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Print the chained block keys of a token sequence",
		Long: `Print one 64-hex block key per full block of tokens, in order.

Tokens are non-negative integers below 2^32, separated by whitespace or commas,
read from --tokens-file or standard input. A trailing partial block has no key.`,
		Example: `  echo 1 2 3 ... | yuebing keys --namespace acme/llama-3-70b --block-size 16`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usage(server.WriteKeys(cmd.OutOrStdout(), cmd.InOrStdin(), o))
		},
	}
	server.BindKeysFlags(cmd.Flags(), &o)
	return cmd
}
