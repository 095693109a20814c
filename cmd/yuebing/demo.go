package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench/demo"
)

func newDemoCmd() *cobra.Command {
	var df demo.Flags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a node, engine simulators and the router on this machine, for a first look",
		Long: `Run the whole system in one process on free loopback ports: a yuebing node
with its console, --engines engine simulators that keep their KV in the node
and publish vLLM KV events, and the node's router in front of them. It prints
the router's OpenAI base URL, the console's URL and a curl to try; with
--traffic it sends a few chats sharing a prefix through the router and prints
where each went and where its KV came from. Ctrl-C stops everything; the data
lives in a temporary directory, removed at exit, unless --data-dir names one.
The engines are simulators (package enginesim), not models: answers are
placeholder tokens, timings come from a 70B model's profile.`,
		Example: `  yuebing demo --traffic
  yuebing demo --engines 4 --data-dir ./demo-data`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := df.Parse()
			if err != nil {
				return usageError{err}
			}
			o.Version = versionString()
			err = demo.Run(cmd.Context(), o, cmd.OutOrStdout())
			if errors.Is(err, demo.ErrInvalid) {
				return usageError{err}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&df.Engines, "engines", 2, "engine simulators behind the router (1 to 16)")
	f.IntVar(&df.BlockSize, "block-size", 16, "tokens per KV block, the engines' and the router's alike (16 to 1024)")
	f.StringVar(&df.DataDir, "data-dir", "", "the node's data directory, kept at exit (default: a temporary one, removed at exit)")
	f.BoolVar(&df.Traffic, "traffic", false, "send a few chats sharing a prefix through the router and print each one's route and cache hits")
	return cmd
}
