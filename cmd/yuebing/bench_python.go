package main

import (
	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench/python"
)

func newBenchPythonCmd() *cobra.Command {
	var pf python.Flags
	cmd := &cobra.Command{
		Use:   "python",
		Short: "Compare the Python client's get_into/put_from with a raw Python socket",
		Long: `Serve a node in this process (DRAM + SSD store in a temporary directory,
shared memory on) and run the Python package's benchmark against it:
python3 -m yuebing.bench. For each size it times MooncakeDistributedStore's
get_into and put_from over shared memory and over the socket, and as the
baseline a raw Python client moving the same bytes to and from a loopback
server process with socket.recv_into / sendall, the three taking turns.

Rows: get_into/SIZE/PATH and put_from/SIZE/PATH with us_per_call, gbps,
baseline, baseline_gbps and ratio; shm rows also vs_socket_path (the socket
path's time over shared memory's). At 1MiB and 4MiB, batch_get_into_x16 and
batch_put_from_x16 rows time calls of 16 values each, as a connector loads a
prefix, against 16 memmoves from separate buffers (vs_memcpy). Needs python3
(Debian's /usr/bin/python3).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := pf.Parse()
			if err != nil {
				return usageError{err}
			}
			o.Stdout, o.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return python.Run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&pf.JSON, "json", false, "print one JSON object instead of a table")
	f.BoolVar(&pf.Quick, "quick", false, "a sixteenth of the bytes, 2 rounds")
	f.StringVar(&pf.Sizes, "sizes", "", "value sizes, comma-separated (default 64KiB,1MiB,4MiB)")
	f.StringVar(&pf.Bytes, "bytes", "", "bytes one contender moves per round (default 64MiB)")
	f.IntVar(&pf.Rounds, "rounds", 0, "rounds; each contender's best counts (default 5)")
	f.StringVar(&pf.DRAMCapacity, "dram-capacity", "512MiB", "the node's DRAM tier")
	f.BoolVar(&pf.FreshArena, "fresh-arena", false, "keep every round's puts, so each lands in DRAM memory the node has not written before (a fresh node's first fill) instead of memory it reuses")
	f.StringVar(&pf.DataDir, "dir", "", "the node's data directory (default: a temporary directory)")
	f.StringVar(&pf.PythonDir, "python-dir", "python", "the directory holding the yuebing Python package")
	f.StringVar(&pf.Python, "python", python.DefaultPython, "the Python interpreter")
	return cmd
}
