// Package demo runs the whole system on one machine for a first look: a
// yuebing node with its console, engine simulators (enginesim) that keep
// their KV in the node through the adapter and publish vLLM KV events, and
// the node's embedded router in front of them, all in this process on free
// loopback ports. `yuebing demo` runs it until Ctrl-C.
//
// Run prints the router's OpenAI base URL, the console's URL and a curl to
// try, and with Options.Traffic sends a few chats that share a prefix
// through the router, one line each (engine chosen, the prefix the router
// counted cached, where the engine found the prompt's KV, latency). When
// its context ends everything stops: engines, router, node, and the data
// directory is removed unless Options.DataDir named one.
//
//	err := demo.Run(ctx, demo.Options{Engines: 2, Traffic: true}, os.Stdout)
//
// What the demo is made of, and what it is not: docs/operations.md, "A
// first look".
package demo

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/yuebing/yuebing/block"
)

// ErrInvalid wraps every problem Validate reports.
var ErrInvalid = errors.New("demo: invalid options")

// MaxEngines bounds Options.Engines: a demo, not a deployment; each engine
// is a goroutine loop, an HTTP listener and two ZMQ sockets.
const MaxEngines = 16

// Options configure Run. The zero value is the default demo.
type Options struct {
	// Engines is how many engine simulators run behind the router.
	// Default 2, at most MaxEngines.
	Engines int
	// BlockSize is the tokens per KV block of the engines and the
	// router: they must agree for the router to match what the engines
	// report. Default 16 (vLLM's).
	BlockSize int
	// DataDir holds the node's SSD tier and is kept after Run. Default: a
	// new directory under os.TempDir, removed when Run returns.
	DataDir string
	// Traffic sends a few chats sharing a prefix through the router once
	// everything is up, and prints a line for each.
	Traffic bool
	// Version is shown in the node's console. Default "demo".
	Version string
	// Logger receives the parts' warnings. Default: warnings and errors
	// as text on stderr.
	Logger *slog.Logger
}

// EnsureDefaults fills the zero fields.
func (o *Options) EnsureDefaults() {
	if o.Engines == 0 {
		o.Engines = 2
	}
	if o.BlockSize == 0 {
		o.BlockSize = 16
	}
	if o.Version == "" {
		o.Version = "demo"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
}

// Validate reports every problem at once, each wrapping ErrInvalid.
func (o *Options) Validate() error {
	var errs []error
	if o.Engines < 1 || o.Engines > MaxEngines {
		errs = append(errs, fmt.Errorf("%w: engines %d: want 1 to %d", ErrInvalid, o.Engines, MaxEngines))
	}
	if err := block.ValidateBlockSize(o.BlockSize); err != nil {
		errs = append(errs, fmt.Errorf("%w: block size: %w", ErrInvalid, err))
	}
	return errors.Join(errs...)
}
