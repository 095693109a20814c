package python

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/yuebing/yuebing/server"
)

// ErrNoPackage reports a PythonDir without the yuebing package's benchmark.
var ErrNoPackage = errors.New("python: no yuebing package")

// DefaultPython is Debian's interpreter, the one the package is tested
// under.
const DefaultPython = "/usr/bin/python3"

// Options configure Run.
type Options struct {
	// PythonDir holds the yuebing Python package (the repository's
	// python/). Required.
	PythonDir string
	// Python is the interpreter. Default DefaultPython.
	Python string
	// DRAMCapacity is the node's DRAM tier in bytes; its SSD tier holds
	// twice that. Default 512 MiB.
	DRAMCapacity int64
	// DataDir is the node's data directory, kept. Default: a new
	// directory under os.TempDir, removed when Run returns.
	DataDir string
	// Sizes and Bytes go to the Python benchmark as written (its --sizes
	// and --bytes; it reads them); empty for its defaults.
	Sizes, Bytes string
	// Rounds of the Python benchmark; 0 for its default.
	Rounds int
	// Quick and JSON are the Python benchmark's --quick and --json.
	Quick, JSON bool
	// FreshArena is the Python benchmark's --fresh-arena: puts keep every
	// key, so each lands in node memory not written since start-up, instead
	// of in the room of the previous round's keys.
	FreshArena bool
	// Stdout gets the benchmark's rows, Stderr its progress. Default:
	// discarded.
	Stdout, Stderr io.Writer
}

// Run serves a node in this process and runs the Python benchmark against
// it, until the benchmark exits or ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.Python == "" {
		o.Python = DefaultPython
	}
	if o.DRAMCapacity == 0 {
		o.DRAMCapacity = 512 << 20
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	pkg, err := filepath.Abs(o.PythonDir)
	if err != nil {
		return fmt.Errorf("bench python: %w", err)
	}
	if err := checkPackage(pkg); err != nil {
		return err
	}
	if o.DataDir == "" {
		if o.DataDir, err = os.MkdirTemp("", "yuebing-bench-python-"); err != nil {
			return fmt.Errorf("bench python: data directory: %w", err)
		}
		defer os.RemoveAll(o.DataDir)
	}
	cfg := server.DefaultConfig()
	cfg.HTTP.Listen, cfg.RESP.Listen, cfg.Transfer.Listen = "127.0.0.1:0", "", ""
	cfg.Conductor.Enabled = false
	cfg.DataDir, cfg.DRAM.Capacity, cfg.SSD.Capacity = o.DataDir, server.ByteSize(o.DRAMCapacity), 2*server.ByteSize(o.DRAMCapacity)
	// The benchmark measures the client's paths, not the disk's flushes.
	cfg.SSD.NoSync = true
	cfg.Banner = io.Discard
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	node, err := server.Start(cfg)
	if err != nil {
		return fmt.Errorf("bench python: starting the node: %w", err)
	}
	defer node.Shutdown()
	args := []string{"-m", "yuebing.bench", "--url", "http://" + node.Addr("http").String()}
	if o.JSON {
		args = append(args, "--json")
	}
	if o.Quick {
		args = append(args, "--quick")
	}
	if o.FreshArena {
		args = append(args, "--fresh-arena")
	}
	if o.Sizes != "" {
		args = append(args, "--sizes", o.Sizes)
	}
	if o.Bytes != "" {
		args = append(args, "--bytes", o.Bytes)
	}
	if o.Rounds > 0 {
		args = append(args, "--rounds", strconv.Itoa(o.Rounds))
	}
	c := exec.CommandContext(ctx, o.Python, args...)
	c.Env = append(os.Environ(), "PYTHONPATH="+pkg, "PYTHONDONTWRITEBYTECODE=1")
	c.Stdout, c.Stderr = o.Stdout, o.Stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("bench python: %s: %w", o.Python, err)
	}
	return nil
}

// checkPackage reports whether dir holds the package's benchmark.
func checkPackage(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "yuebing", "bench.py")); err != nil {
		return fmt.Errorf("%w in %s: %w", ErrNoPackage, dir, err)
	}
	return nil
}
