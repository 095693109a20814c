package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/server"
)

func newConfigCmd() *cobra.Command {
	var cfg server.Config
	var flags *server.ConfigFlags
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the effective configuration of 'yuebing serve' as YAML",
		Long: `Print the configuration 'yuebing serve' would run with, given the same flags,
--config file and YUEBING_* environment: defaults filled in (capacities derived
from this machine), as YAML that --config accepts. The tokens file is named,
never read. An invalid configuration is reported, every problem naming its
field, with exit status 2.`,
		Example: `  yuebing config > yuebing.yaml
  YUEBING_DRAM_CAPACITY=8GiB yuebing config --data-dir /srv/yuebing`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flags.Load(os.Environ(), cmd.ErrOrStderr()); err != nil {
				return usageError{err}
			}
			cfg.EnsureDefaults()
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			out, err := cfg.YAML()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	flags = server.BindConfigFlags(cmd.Flags(), &cfg)
	return cmd
}
