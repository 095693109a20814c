package main

import (
	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/server"
)

func newConductorCmd() *cobra.Command {
	var o server.ConductorOptions
	cmd := &cobra.Command{
		Use:   "conductor",
		Short: "Run the conductor: KV-cache-aware scheduling of prefill and decode instances",
		Long: `Run the conductor alone: an HTTP service that places each request on the prefill
instance with the shortest estimated TTFT given where its prefix is cached
(Mooncake's Algorithm 1), picks a decode instance within the TBT SLO, and
rejects with 429 what cannot be served in time. Instances register, report
their load and the blocks they hold; see docs/conductor.md.

A listen address off loopback needs --auth-tokens-file (the /v1/conductor
endpoints then take an admin token, the OpenAI ones any token) or --insecure.`,
		Example: `  yuebing conductor --listen 127.0.0.1:8090 --rejection predicted
  yuebing conductor --listen 127.0.0.1:8000 --model llama --namespace acme/llama \
    --engine id=e0,url=http://10.0.0.5:8000,events=tcp://10.0.0.5:5557,replay=tcp://10.0.0.5:5558`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Banner = cmd.ErrOrStderr()
			return usage(server.RunConductor(cmd.Context(), o))
		},
	}
	server.BindConductorFlags(cmd.Flags(), &o)
	return cmd
}
