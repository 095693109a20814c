package main

import (
	"github.com/yuebing/yuebing/bench/store"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/bench"
)

func newBenchStoreCmd() *cobra.Command {
	var (
		sf     store.Flags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Measure the DRAM and SSD tiers and the prefix index against same-run baselines",
		Long: `Measure puts and gets of the DRAM tier against copy() of the same bytes, durable
puts and cold gets of the SSD tier against write+fdatasync and pread of the same
bytes, and a 512-block prefix match against Go's map, all in one run.

Rows: dram_put, dram_get, ssd_put, ssd_get (gbps, baseline, baseline_gbps,
ratio) and prefix_match (p50_us, p99_us, bytes_per_entry). --quick runs a
reduced set in well under a minute.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := sf.Parse()
			if err != nil {
				return usageError{err}
			}
			o.Progress = bench.NewProgress("store", int64(store.Cases(o)))
			rep, err := store.Run(cmd.Context(), o)
			o.Progress.Done()
			if err != nil {
				return err
			}
			return rep.Write(cmd.OutOrStdout(), asJSON)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	f.BoolVar(&sf.Quick, "quick", false, "run a reduced set in well under a minute")
	f.StringVar(&sf.Dir, "dir", "", "directory for the SSD cases (default: a temporary directory)")
	f.DurationVar(&sf.Duration, "duration", 0, "time per measurement and per baseline (default 1s, 200ms with --quick)")
	f.StringVar(&sf.Sizes, "sizes", "", "block sizes, comma-separated (default 64KiB,1MiB,16MiB)")
	f.StringVar(&sf.Goroutines, "goroutines", "", "concurrency levels, comma-separated (default 1,2)")
	f.StringVar(&sf.IndexEntries, "index-entries", "", "index size for the prefix match (default 10M, 1M with --quick)")
	return cmd
}
