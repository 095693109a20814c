package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/server"
)

func newBenchPythonCmd() *cobra.Command {
	var (
		asJSON, quick          bool
		sizes, dir, pythonDir  string
		python, dramCap, bytes string
		rounds                 int
	)
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
path's time over shared memory's). Needs python3 (Debian's /usr/bin/python3).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := os.Stat(filepath.Join(pythonDir, "yuebing", "bench.py")); err != nil {
				return usageErrorf("--python-dir: %s has no yuebing package (run from the repository root or point it at python/)", pythonDir)
			}
			if rounds < 0 {
				return usageErrorf("--rounds must not be negative")
			}
			dcap, err := parseSize(dramCap)
			if err != nil || dcap < 64<<20 {
				return usageErrorf("--dram-capacity: %q: want a size like 512MiB, at least 64MiB", dramCap)
			}
			if dir == "" {
				if dir, err = os.MkdirTemp("", "yuebing-bench-python-"); err != nil {
					return err
				}
				defer os.RemoveAll(dir)
			}
			cfg := server.DefaultConfig()
			cfg.HTTP.Listen, cfg.RESP.Listen, cfg.Transfer.Listen = "127.0.0.1:0", "", ""
			cfg.Conductor.Enabled = false
			cfg.DataDir, cfg.DRAM.Capacity, cfg.SSD.Capacity = dir, server.ByteSize(dcap), 2*server.ByteSize(dcap)
			cfg.SSD.NoSync = true
			cfg.Banner = io.Discard
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			node, err := server.Start(cfg)
			if err != nil {
				return err
			}
			defer node.Shutdown()
			abs, _ := filepath.Abs(pythonDir)
			args := []string{"-m", "yuebing.bench", "--url", "http://" + node.Addr("http").String()}
			if asJSON {
				args = append(args, "--json")
			}
			if quick {
				args = append(args, "--quick")
			}
			if sizes != "" {
				args = append(args, "--sizes", sizes)
			}
			if bytes != "" {
				args = append(args, "--bytes", bytes)
			}
			if rounds > 0 {
				args = append(args, "--rounds", fmt.Sprint(rounds))
			}
			return runPython(cmd.Context(), python, abs, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	f.BoolVar(&quick, "quick", false, "a sixteenth of the bytes, 2 rounds")
	f.StringVar(&sizes, "sizes", "", "value sizes, comma-separated (default 64KiB,1MiB,4MiB)")
	f.StringVar(&bytes, "bytes", "", "bytes one contender moves per round (default 64MiB)")
	f.IntVar(&rounds, "rounds", 0, "rounds; each contender's best counts (default 5)")
	f.StringVar(&dramCap, "dram-capacity", "512MiB", "the node's DRAM tier")
	f.StringVar(&dir, "dir", "", "the node's data directory (default: a temporary directory)")
	f.StringVar(&pythonDir, "python-dir", "python", "the directory holding the yuebing Python package")
	f.StringVar(&python, "python", "/usr/bin/python3", "the Python interpreter")
	return cmd
}

// runPython runs the interpreter with the package directory on its path.
func runPython(ctx context.Context, python, dir string, args []string, stdout, stderr io.Writer) error {
	c := exec.CommandContext(ctx, python, args...)
	c.Env = append(os.Environ(), "PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1")
	c.Stdout, c.Stderr = stdout, stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("bench python: %s: %w", python, err)
	}
	return nil
}
