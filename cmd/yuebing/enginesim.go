package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/enginesim"
)

func newEngineSimCmd() *cobra.Command {
	var o enginesim.RunOptions
	cmd := &cobra.Command{
		Use:   "engine-sim",
		Short: "Run an inference engine simulator with an OpenAI-compatible API",
		Long: `Run a simulator of a vLLM-style inference engine: an OpenAI-compatible HTTP
server (POST /v1/completions with the prompt as token ids, streaming with
"stream": true; GET /v1/models, /health, /metrics) in front of a paged KV pool
with its own prefix cache, in simulated HBM (hbmsim). Prefill time comes from
the scheduler's prefill profile, scaled by --time-scale; decoding is one step
of --decode-step per iteration for the whole running batch.

With --yuebing the engine uses a yuebing node as its KV pool through the
adapter: each prompt's cached prefix is looked up and loaded layer by layer
while the prefill computes, and new blocks are saved as each layer completes.
KV bytes are real and deterministic from the tokens, and every loaded layer is
checked. Responses carry a "yuebing" object with the hit tokens by source and
tier, the load time and how much of it the prefill waited for. See
docs/adapter.md.

With --kv-events the engine publishes its prefix cache's changes as vLLM's
KV events (BlockStored, BlockRemoved) on a ZMQ PUB socket, with a replay
socket at --kv-replay, for 'yuebing conductor' to route by (docs/conductor.md).`,
		Example: `  yuebing engine-sim --listen 127.0.0.1:8000 --yuebing http://127.0.0.1:8080
  curl -s 127.0.0.1:8000/v1/completions -d '{"prompt":[1,2,3],"max_tokens":4}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Banner = cmd.OutOrStdout()
			err := enginesim.Run(cmd.Context(), o)
			if errors.Is(err, enginesim.ErrInvalid) {
				return usageError{err}
			}
			return err
		},
	}
	enginesim.BindFlags(cmd.Flags(), &o)
	return cmd
}
