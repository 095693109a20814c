// Command yuebing is the KV-cache server for LLM inference and its tools.
//
// It only parses flags and configuration and hands off to packages; see
// docs/architecture.md for the parts and docs/operations.md for running it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "yuebing:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "yuebing",
		Short:         "yuebing is a KV-cache server for LLM inference",
		Long:          "yuebing keeps the attention KV cache of prompt prefixes in a tiered DRAM + SSD block store\nso inference engines can reuse it instead of recomputing it.",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newVersionCmd(), newKeysCmd(), newServeCmd(), newConfigCmd(), newConductorCmd(), newEngineSimCmd(), newDemoCmd(), newBenchCmd())
	return root
}

// usageError marks errors in how the command was invoked (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func usageErrorf(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }
