package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/yuebing/yuebing/internal/bytesize"
	"github.com/yuebing/yuebing/server"
)

func newServeCmd() *cobra.Command {
	var sf serveFlags
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
			cfg, err := sf.config(cmd)
			if err != nil {
				return err
			}
			cfg.Version = versionString()
			err = server.Run(cmd.Context(), cfg)
			if errors.Is(err, server.ErrInvalidConfig) {
				return usageError{err}
			}
			return err
		},
	}
	sf.register(cmd.Flags())
	return cmd
}

// serveFlags are the flags of serve and config. Only flags given on the
// command line override the file and the environment.
type serveFlags struct {
	conductor                                bool
	configFile                               string
	httpListen, respListen, transferListen   string
	dataDir, dramCapacity, ssdCapacity       string
	dramPolicy, ssdCompression, tokensFile   string
	maxBlockSize, maxBatchBytes, maxInflight string
	logLevel, logFormat                      string
	ssdNoSync, insecure, dramPrefault        bool
	maxBatchKeys                             int
	requestTimeout, shutdownTimeout, maxTTL  time.Duration
	cluster, nodeName, etcd, etcdListen      string
	clusterToken, advHTTP, advTransfer       string
	advRESP, admit                           string
	etcdEmbedded, respLocalOnly              bool
	dramPrefaultBackground                   bool
	dataDirLockWait                          time.Duration
	leaseTTL                                 time.Duration
	shmListen                                string
	flags                                    *pflag.FlagSet
}

func (s *serveFlags) register(f *pflag.FlagSet) {
	s.flags = f
	f.StringVar(&s.configFile, "config", "", "YAML config file (see 'yuebing config' for the fields)")
	f.StringVar(&s.httpListen, "http-listen", server.DefaultHTTPListen, "HTTP API address host:port")
	f.StringVar(&s.respListen, "resp-listen", server.DefaultRESPListen, "Redis-protocol address host:port; empty disables")
	f.StringVar(&s.transferListen, "transfer-listen", server.DefaultTransferListen, "transfer service address host:port; empty disables")
	f.StringVar(&s.shmListen, "shm-listen", "auto", "unix socket handing same-host clients shared-memory segments: a path, @abstract, or auto; empty disables")
	f.StringVar(&s.dataDir, "data-dir", server.DefaultDataDir, "directory of the SSD tier and the contexts file")
	f.DurationVar(&s.dataDirLockWait, "data-dir-lock-wait", 0, "how long to wait for another process holding --data-dir to exit before refusing to start (default 10s)")
	f.StringVar(&s.dramCapacity, "dram-capacity", "", "DRAM tier size, e.g. 4GiB (default min(4GiB, 25% of RAM))")
	f.StringVar(&s.ssdCapacity, "ssd-capacity", "", "SSD tier size, e.g. 64GiB (default min(64GiB, 50% of free disk))")
	f.StringVar(&s.dramPolicy, "dram-policy", "lru", "DRAM eviction policy")
	f.StringVar(&s.ssdCompression, "ssd-compression", "none", "SSD compression: none, s2 or zstd")
	f.BoolVar(&s.dramPrefault, "dram-prefault", false, "touch the whole DRAM arena at start (slower start, faster first puts; the whole arena is resident at once)")
	f.BoolVar(&s.dramPrefaultBackground, "dram-prefault-background", false, "touch the whole DRAM arena in the background after start (instant start; the whole arena is resident within seconds)")
	f.BoolVar(&s.ssdNoSync, "ssd-no-sync", false, "acknowledge SSD writes before they are flushed to the device")
	f.StringVar(&s.tokensFile, "auth-tokens-file", "", "YAML file of bearer tokens: token: {tenant: NAME, role: admin|tenant}")
	f.BoolVar(&s.insecure, "insecure", false, "allow a non-loopback listener without authentication")
	f.BoolVar(&s.conductor, "conductor", true, "embed the conductor (KV-cache-aware scheduling) at /v1/conductor; its settings are under conductor: in --config")
	f.StringVar(&s.maxBlockSize, "max-block-size", "", "largest block (default 256MiB)")
	f.IntVar(&s.maxBatchKeys, "max-batch-keys", 0, "most keys in one batch call or context (default 4096)")
	f.StringVar(&s.maxBatchBytes, "max-batch-bytes", "", "most block bytes in one multi-put or multi-get (default 256MiB)")
	f.StringVar(&s.maxInflight, "max-inflight-bytes", "", "heap bytes requests in flight may hold, HTTP, Redis and cluster reads together; more get 429 or -ERR (default 1GiB)")
	f.DurationVar(&s.requestTimeout, "request-timeout", 0, "time limit of one request (default 60s)")
	f.DurationVar(&s.shutdownTimeout, "shutdown-timeout", 0, "time limit for draining requests, and again for flushing, on shutdown (default 30s)")
	f.DurationVar(&s.maxTTL, "max-context-ttl", 0, "longest context TTL (default 24h)")
	f.StringVar(&s.cluster, "cluster", "", "join the cluster of this name (needs --etcd or --etcd-embedded); see docs/cluster.md")
	f.StringVar(&s.nodeName, "node-name", "", "this node's name in the cluster, stable across restarts (default: the host name)")
	f.StringVar(&s.etcd, "etcd", "", "etcd client URLs, comma-separated, e.g. http://h1:2379,http://h2:2379")
	f.BoolVar(&s.etcdEmbedded, "etcd-embedded", false, "run a single-member etcd inside this node (dev clusters; other nodes use --etcd http://THIS:2379)")
	f.StringVar(&s.etcdListen, "etcd-embedded-listen", "", "client address of the embedded etcd (default 127.0.0.1:2379)")
	f.StringVar(&s.clusterToken, "cluster-token-file", "", "file holding the token nodes authenticate each other with (required off loopback)")
	f.StringVar(&s.advHTTP, "advertise-http", "", "HTTP address other nodes reach this one at (default: the bound --http-listen)")
	f.StringVar(&s.advTransfer, "advertise-transfer", "", "transfer address other nodes reach this one at (default: the bound --transfer-listen)")
	f.StringVar(&s.advRESP, "advertise-resp", "", "Redis-protocol address announced to the cluster")
	f.BoolVar(&s.respLocalOnly, "resp-local-only", false, "in a cluster, serve Redis keys set through this node only (no lookups on the other nodes)")
	f.StringVar(&s.admit, "cluster-admit", "", "keep blocks read from other nodes: always, second-hit or never (default second-hit)")
	f.DurationVar(&s.leaseTTL, "lease-ttl", 0, "how long a silent node stays a member; the time to notice a dead node (default 10s)")
	f.StringVar(&s.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&s.logFormat, "log-format", "text", "text or json")
}

// config builds the server.Config: defaults, file, environment, flags.
func (s *serveFlags) config(cmd *cobra.Command) (server.Config, error) {
	cfg := server.DefaultConfig()
	if s.configFile != "" {
		if err := cfg.LoadFile(s.configFile); err != nil {
			return cfg, usageErrorf("--config: %v", err)
		}
	}
	unknown, err := cfg.ApplyEnv(os.Environ())
	if err != nil {
		return cfg, usageError{err}
	}
	for _, name := range unknown {
		fmt.Fprintf(cmd.ErrOrStderr(), "yuebing: warning: %s is not a setting of yuebing serve; ignored\n", name)
	}
	changed := s.flags.Changed
	str := func(name string, dst *string, v string) {
		if changed(name) {
			*dst = v
		}
	}
	size := func(name string, dst *server.ByteSize, v string) error {
		if !changed(name) {
			return nil
		}
		n, err := bytesize.Parse(v)
		if err != nil {
			return usageErrorf("--%s: %v", name, err)
		}
		*dst = server.ByteSize(n)
		return nil
	}
	str("http-listen", &cfg.HTTP.Listen, s.httpListen)
	str("resp-listen", &cfg.RESP.Listen, s.respListen)
	str("transfer-listen", &cfg.Transfer.Listen, s.transferListen)
	str("shm-listen", &cfg.Shm.Listen, s.shmListen)
	str("data-dir", &cfg.DataDir, s.dataDir)
	str("dram-policy", &cfg.DRAM.Policy, s.dramPolicy)
	str("ssd-compression", &cfg.SSD.Compression, s.ssdCompression)
	str("auth-tokens-file", &cfg.Auth.TokensFile, s.tokensFile)
	str("log-level", &cfg.Log.Level, s.logLevel)
	str("cluster", &cfg.Cluster.Name, s.cluster)
	str("node-name", &cfg.Cluster.NodeName, s.nodeName)
	str("etcd", &cfg.Cluster.Etcd, s.etcd)
	str("etcd-embedded-listen", &cfg.Cluster.EtcdEmbeddedListen, s.etcdListen)
	str("cluster-token-file", &cfg.Cluster.TokenFile, s.clusterToken)
	str("advertise-http", &cfg.Cluster.AdvertiseHTTP, s.advHTTP)
	str("advertise-transfer", &cfg.Cluster.AdvertiseTransfer, s.advTransfer)
	str("advertise-resp", &cfg.Cluster.AdvertiseRESP, s.advRESP)
	str("cluster-admit", &cfg.Cluster.Admit, s.admit)
	if changed("etcd-embedded") {
		cfg.Cluster.EtcdEmbedded = s.etcdEmbedded
	}
	if changed("resp-local-only") {
		cfg.Cluster.RESPLocalOnly = s.respLocalOnly
	}
	str("log-format", &cfg.Log.Format, s.logFormat)
	for _, sz := range []struct {
		name string
		dst  *server.ByteSize
		v    string
	}{
		{"dram-capacity", &cfg.DRAM.Capacity, s.dramCapacity},
		{"ssd-capacity", &cfg.SSD.Capacity, s.ssdCapacity},
		{"max-block-size", &cfg.Limits.MaxBlockSize, s.maxBlockSize},
		{"max-batch-bytes", &cfg.Limits.MaxBatchBytes, s.maxBatchBytes},
		{"max-inflight-bytes", &cfg.Limits.MaxInflightBytes, s.maxInflight},
	} {
		if err := size(sz.name, sz.dst, sz.v); err != nil {
			return cfg, err
		}
	}
	if changed("dram-prefault") {
		cfg.DRAM.Prefault = s.dramPrefault
	}
	if changed("data-dir-lock-wait") {
		cfg.DataDirLockWait = s.dataDirLockWait
	}
	if changed("dram-prefault-background") {
		cfg.DRAM.PrefaultBackground = s.dramPrefaultBackground
	}
	if changed("ssd-no-sync") {
		cfg.SSD.NoSync = s.ssdNoSync
	}
	if changed("insecure") {
		cfg.Insecure = s.insecure
	}
	if changed("conductor") {
		cfg.Conductor.Enabled = s.conductor
	}
	if changed("max-batch-keys") {
		cfg.Limits.MaxBatchKeys = s.maxBatchKeys
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
		v    time.Duration
	}{
		{"request-timeout", &cfg.Limits.RequestTimeout, s.requestTimeout},
		{"shutdown-timeout", &cfg.Limits.ShutdownTimeout, s.shutdownTimeout},
		{"max-context-ttl", &cfg.Contexts.MaxTTL, s.maxTTL},
		{"lease-ttl", &cfg.Cluster.LeaseTTL, s.leaseTTL},
	} {
		if changed(d.name) {
			if d.v <= 0 {
				return cfg, usageErrorf("--%s: %v: want a positive duration like 30s", d.name, d.v)
			}
			*d.dst = d.v
		}
	}
	return cfg, nil
}
