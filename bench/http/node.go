package http

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/yuebing/yuebing/server"
)

// NodeOptions configure the node Run starts in this process when
// Options.Addr is empty: HTTP only, on a free loopback port, over a DRAM
// tier and an SSD tier.
type NodeOptions struct {
	// DRAMCapacity is the DRAM tier's size in bytes. Default 2 GiB.
	DRAMCapacity int64
	// Prefault touches every page of the DRAM arena at start, as a node
	// that has run a while has them.
	Prefault bool
	// DataDir holds the SSD tier and is kept. Default: a new directory
	// under os.TempDir, removed when Run returns.
	DataDir string
	// Logger receives the node's warnings. Default: warnings and errors
	// as text on stderr.
	Logger *slog.Logger
}

// StartNode starts the node o describes, sized for blocks of valueSize
// bytes, and returns its HTTP address. stop shuts it down and removes a
// temporary data directory. Run calls it without Options.Addr; other
// harnesses that need a node to write to may too.
func StartNode(o NodeOptions, valueSize int64) (stop func(), addr string, err error) {
	if o.DRAMCapacity == 0 {
		o.DRAMCapacity = 2 << 30
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	cleanup := func() {}
	if o.DataDir == "" {
		if o.DataDir, err = os.MkdirTemp("", "yuebing-bench-http-"); err != nil {
			return nil, "", fmt.Errorf("bench: data directory of the in-process node: %w", err)
		}
		dir := o.DataDir
		cleanup = func() { os.RemoveAll(dir) }
	}
	cfg := server.DefaultConfig()
	cfg.HTTP.Listen, cfg.RESP.Listen, cfg.Transfer.Listen = "127.0.0.1:0", "", ""
	cfg.DataDir = o.DataDir
	cfg.DRAM.Capacity = server.ByteSize(o.DRAMCapacity)
	cfg.DRAM.Prefault = o.Prefault
	// Room for the working set and for every put the run makes, on
	// the SSD and in flight, however large the blocks.
	cfg.SSD.Capacity = server.ByteSize(max(4<<30, 4*valueSize))
	cfg.Limits.MaxBlockSize = server.ByteSize(max(valueSize, 256<<20))
	cfg.Limits.MaxInflightBytes = server.ByteSize(max(8*valueSize, 1<<30))
	cfg.Banner = io.Discard
	cfg.Logger = o.Logger
	node, err := server.Start(cfg)
	if err != nil {
		cleanup()
		return nil, "", fmt.Errorf("bench: starting the in-process node: %w", err)
	}
	return func() {
		node.Shutdown()
		cleanup()
	}, node.Addr("http").String(), nil
}
