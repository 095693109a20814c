package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/yuebing/yuebing/server"
)

func newServeCmd() *cobra.Command {
	var cfg server.Config
	var flags *server.ConfigFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a cache node: DRAM + SSD block store behind the HTTP API",
		Long: `Run a single cache node. With no flags: DRAM tier of min(4GiB, 25% of RAM), SSD
tier under ./yuebing-data of min(64GiB, 50% of free disk), HTTP on 127.0.0.1:8080,
authentication off (loopback only).

Configuration comes from defaults, then the YAML file of --config, then YUEBING_*
environment variables (YUEBING_HTTP_LISTEN, YUEBING_DRAM_CAPACITY, ...: the YAML
path in upper case), then flags; later wins. 'yuebing config' prints the result.
SIGINT or SIGTERM shuts down gracefully: stop accepting, drain requests, flush
DRAM blocks to SSD. See docs/operations.md.`,
		Example: `  yuebing serve
  yuebing serve --data-dir /var/lib/yuebing --dram-capacity 32GiB --ssd-capacity 1TiB
  yuebing serve --http-listen 0.0.0.0:8080 --auth-tokens-file /etc/yuebing/tokens.yaml
  yuebing serve --cluster dev --node-name a --etcd-embedded
  yuebing serve --cluster prod --etcd http://etcd1:2379,http://etcd2:2379 --cluster-token-file /etc/yuebing/cluster.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flags.Load(os.Environ(), cmd.ErrOrStderr()); err != nil {
				return usageError{err}
			}
			cfg.Version = versionString()
			return usage(server.Run(cmd.Context(), cfg))
		},
	}
	flags = server.BindConfigFlags(cmd.Flags(), &cfg)
	return cmd
}

// usage marks an invalid configuration as a usage error (exit status 2).
func usage(err error) error {
	if errors.Is(err, server.ErrInvalidConfig) {
		return usageError{err}
	}
	return err
}
