package main

import (
	"time"

	"github.com/yuebing/yuebing/bench/transfer"

	"github.com/spf13/cobra"
)

func newBenchTransferCmd() *cobra.Command {
	var (
		o      transfer.Options
		asJSON bool
		noProg bool
	)
	cmd := &cobra.Command{
		Use:   "transfer",
		Short: "Measure the transfer service (tcp or shm) against a same-run baseline",
		Long: `Run a server and a client transfer engine in this process and move blocks between
them for --duration: --threads goroutines, each submitting batches of --batch requests
of --block-size bytes. Prints GB/s and per-request p50/p99 latency, next to a baseline
measured in the same run: one raw TCP stream over loopback (tcp), or copy() on the same
number of goroutines (shm). With --paths N, each side gets N loopback NICs
(127.0.0.x addresses), so a transfer is sliced over N connections.`,
		Example: `  yuebing bench transfer --transport tcp --op read --paths 4 --slice-size 1048576
  yuebing bench transfer --transport shm --op write --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.ValidateFlags(); err != nil {
				return usageError{err}
			}
			o.Progress = !noProg
			r, err := transfer.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			return r.Write(cmd.OutOrStdout(), asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Transport, "transport", "tcp", "transport to measure: tcp or shm")
	f.StringVar(&o.Op, "op", "read", "operation: read or write")
	f.IntVar(&o.Threads, "threads", 4, "goroutines submitting batches")
	f.IntVar(&o.Batch, "batch", 16, "requests per batch")
	f.IntVar(&o.BlockSize, "block-size", 1<<20, "bytes per request")
	f.IntVar(&o.Paths, "paths", 4, "loopback NICs per side, so paths per transfer (tcp)")
	f.IntVar(&o.SliceSize, "slice-size", 1<<20, "bytes per slice (tcp)")
	f.DurationVar(&o.Duration, "duration", 5*time.Second, "how long to transfer; the baseline runs as long")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"results":[...]} instead of a table`)
	f.BoolVar(&noProg, "no-progress", false, "do not draw a progress bar on stderr")
	return cmd
}
