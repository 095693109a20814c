package server

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/yuebing/yuebing/router"
)

// The command line binds each flag to the field it sets: the field, its
// YAML name and its default are declared once, in the Options or Config
// struct, and a flag is one line here.

// yamlAnnotation marks a flag with the YAML name of its field, so an error
// about the field names the flag the operator typed.
const yamlAnnotation = "yaml"

// ConfigFlags are the command line of `yuebing serve` and `yuebing config`.
type ConfigFlags struct {
	cfg   *Config
	flags *pflag.FlagSet
	file  string
}

// BindConfigFlags sets *cfg to DefaultConfig and binds the serve flags to
// its fields; Load then layers them over the file and the environment.
func BindConfigFlags(f *pflag.FlagSet, cfg *Config) *ConfigFlags {
	*cfg = DefaultConfig()
	c := cfg
	s := &ConfigFlags{cfg: cfg, flags: f}
	f.StringVar(&s.file, "config", "", "YAML config file (see 'yuebing config' for the fields)")
	f.StringVar(&c.HTTP.Listen, "http-listen", c.HTTP.Listen, "HTTP API address host:port")
	f.StringVar(&c.RESP.Listen, "resp-listen", c.RESP.Listen, "Redis-protocol address host:port; empty disables")
	f.StringVar(&c.Transfer.Listen, "transfer-listen", c.Transfer.Listen, "transfer service address host:port; empty disables")
	f.StringVar(&c.Shm.Listen, "shm-listen", c.Shm.Listen, "unix socket handing same-host clients shared-memory segments: a path, @abstract, or auto; empty disables")
	f.StringVar(&c.DataDir, "data-dir", DefaultDataDir, "directory of the SSD tier and the contexts file")
	f.DurationVar(&c.DataDirLockWait, "data-dir-lock-wait", 0, "how long to wait for another process holding --data-dir to exit before refusing to start (default 10s)")
	sizeVar(f, &c.DRAM.Capacity, "dram-capacity", "DRAM tier size, e.g. 4GiB (default min(4GiB, 25% of RAM))")
	sizeVar(f, &c.SSD.Capacity, "ssd-capacity", "SSD tier size, e.g. 64GiB (default min(64GiB, 50% of free disk))")
	f.StringVar(&c.DRAM.Policy, "dram-policy", "", "DRAM eviction policy (default lru)")
	f.StringVar(&c.SSD.Compression, "ssd-compression", "", "SSD compression: none, s2 or zstd (default none)")
	f.BoolVar(&c.DRAM.Prefault, "dram-prefault", false, "touch the whole DRAM arena at start (slower start, faster first puts; the whole arena is resident at once)")
	f.BoolVar(&c.DRAM.BackgroundPrefault, "dram-prefault-background", false, "touch the whole DRAM arena in the background after start (instant start; the whole arena is resident within seconds)")
	f.BoolVar(&c.SSD.NoSync, "ssd-no-sync", false, "acknowledge SSD writes before they are flushed to the device")
	f.StringVar(&c.Auth.TokensFile, "auth-tokens-file", "", "YAML file of bearer tokens: token: {tenant: NAME, role: admin|tenant}")
	f.BoolVar(&c.Insecure, "insecure", false, "allow a non-loopback listener without authentication")
	f.BoolVar(&c.Conductor.Enabled, "conductor", c.Conductor.Enabled, "embed the conductor (KV-cache-aware scheduling) at /v1/conductor; its settings are under conductor: in --config")
	sizeVar(f, &c.Limits.MaxBlockSize, "max-block-size", "largest block (default 256MiB)")
	f.IntVar(&c.Limits.MaxBatchKeys, "max-batch-keys", 0, "most keys in one batch call or context (default 4096)")
	sizeVar(f, &c.Limits.MaxBatchBytes, "max-batch-bytes", "most block bytes in one multi-put or multi-get (default 256MiB)")
	sizeVar(f, &c.Limits.MaxInflightBytes, "max-inflight-bytes", "heap bytes requests in flight may hold, HTTP, Redis and cluster reads together; more get 429 or -ERR (default 1GiB)")
	f.DurationVar(&c.Limits.RequestTimeout, "request-timeout", 0, "time limit of one request (default 60s)")
	f.DurationVar(&c.Limits.ShutdownTimeout, "shutdown-timeout", 0, "time limit for draining requests, and again for flushing, on shutdown (default 30s)")
	f.DurationVar(&c.Contexts.MaxTTL, "max-context-ttl", 0, "longest context TTL (default 24h)")
	f.StringVar(&c.Cluster.Cluster, "cluster", "", "join the cluster of this name (needs --etcd or --etcd-embedded); see docs/cluster.md")
	f.StringVar(&c.Cluster.NodeName, "node-name", "", "this node's name in the cluster, stable across restarts (default: the host name)")
	f.Var(&c.Cluster.Endpoints, "etcd", "etcd client URLs, comma-separated, e.g. http://h1:2379,http://h2:2379")
	f.BoolVar(&c.Cluster.EtcdEmbedded, "etcd-embedded", false, "run a single-member etcd inside this node (dev clusters; other nodes use --etcd http://THIS:2379)")
	f.StringVar(&c.Cluster.EtcdEmbeddedListen, "etcd-embedded-listen", "", "client address of the embedded etcd (default 127.0.0.1:2379)")
	f.StringVar(&c.Cluster.TokenFile, "cluster-token-file", "", "file holding the token nodes authenticate each other with (required off loopback)")
	f.StringVar(&c.Cluster.AdvertiseHTTP, "advertise-http", "", "HTTP address other nodes reach this one at (default: the bound --http-listen)")
	f.StringVar(&c.Cluster.AdvertiseTransfer, "advertise-transfer", "", "transfer address other nodes reach this one at (default: the bound --transfer-listen)")
	f.StringVar(&c.Cluster.AdvertiseRESP, "advertise-resp", "", "Redis-protocol address announced to the cluster")
	f.BoolVar(&c.Cluster.RESPLocalOnly, "resp-local-only", false, "in a cluster, serve Redis keys set through this node only (no lookups on the other nodes)")
	f.StringVar(&c.Cluster.Admit, "cluster-admit", "", "keep blocks read from other nodes: always, second-hit or never (default second-hit)")
	f.DurationVar(&c.Cluster.LeaseTTL, "lease-ttl", 0, "how long a silent node stays a member; the time to notice a dead node (default 10s)")
	f.StringVar(&c.Log.Level, "log-level", "", "debug, info, warn or error (default info)")
	f.StringVar(&c.Log.Format, "log-format", "", "text or json (default text)")
	return s
}

// Load fills the bound Config as `yuebing serve` runs with, later winning:
// DefaultConfig, the --config file, the YUEBING_* variables of environ,
// then the flags the command line set. Variables that name no setting get
// a warning on warn: other commands may read variables of their own.
// Errors wrap ErrInvalidConfig.
func (s *ConfigFlags) Load(environ []string, warn io.Writer) error {
	// The flags were parsed into the fields already; keep what the command
	// line said, and say it again over the file and the environment.
	given := map[string]string{}
	s.flags.Visit(func(fl *pflag.Flag) { given[fl.Name] = fl.Value.String() })
	*s.cfg = DefaultConfig()
	if s.file != "" {
		if err := s.cfg.LoadFile(s.file); err != nil {
			return fmt.Errorf("--config: %w", err)
		}
	}
	unknown, err := s.cfg.ApplyEnv(environ)
	if err != nil {
		return err
	}
	for _, name := range unknown {
		fmt.Fprintf(warn, "yuebing: warning: %s is not a setting of yuebing serve; ignored\n", name)
	}
	for name, v := range given {
		if err := s.flags.Set(name, v); err != nil {
			return fmt.Errorf("%w: --%s: %v", ErrInvalidConfig, name, err)
		}
	}
	return nil
}

// DefaultConductorListen is the address of `yuebing conductor`.
const DefaultConductorListen = "127.0.0.1:8090"

// BindConductorFlags sets *o to the defaults of `yuebing conductor` and
// binds its flags to o's fields: the conductor's, its limits, and the
// router's (the router runs when --engine names engines). Errors about a
// field then name its flag.
func BindConductorFlags(f *pflag.FlagSet, o *ConductorOptions) {
	*o = ConductorOptions{Listen: DefaultConductorListen, Config: DefaultConductorConfig()}
	o.Limits.EnsureDefaults()
	o.FieldName = flagNamer(f)
	c, r := &o.Config, &o.Router
	var rd router.Options
	rd.EnsureDefaults()
	f.StringVar(&o.Listen, "listen", o.Listen, "HTTP listen address")
	f.StringVar(&o.TokensFile, "auth-tokens-file", "", "YAML file of bearer tokens (token: {tenant: NAME, role: admin|tenant}): /v1/conductor takes an admin's, the OpenAI endpoints any")
	f.BoolVar(&o.Insecure, "insecure", false, "allow a non-loopback listener without authentication")
	f.StringVar(&c.Policy, "policy", c.Policy, "prefill placement: conductor or cache-global (Algorithm 1), least_loaded or load, round_robin or round-robin, cache-local, random")
	f.StringVar(&c.Rejection, "rejection", c.Rejection, "overload policy: none, early or predicted")
	f.Var(intsFlag{&c.BlockSize, &r.BlockSize}, "block-size", fmt.Sprintf("tokens per block key (with --engine: the router's, default %d)", rd.BlockSize))
	f.Float64Var(&c.BalancingThreshold, "threshold", c.BalancingThreshold, "kvcache_balancing_threshold: pull a remote prefix when it is this many times longer than the local one")
	f.Float64Var(&c.BandwidthGbps, "bandwidth", c.BandwidthGbps, "KV transfer bandwidth between instances, in Gbps")
	sizeVar(f, &c.KVBytesPerToken, "kv-bytes-per-token", "KV cache bytes per token of the model (the default is LLaMA3-70B's)")
	f.DurationVar(&c.TTFTSLO, "ttft-slo", c.TTFTSLO, "TTFT SLO")
	f.DurationVar(&c.TBTSLO, "tbt-slo", c.TBTSLO, "TBT SLO")
	f.DurationVar(&c.DecodeTime, "td", c.DecodeTime, "uniform decode time t_d of predicted rejection")
	f.StringVar(&c.PrefillProfile, "prefill-profile", "", "prefill profile CSV (input_len,prefix_len,seconds); default: LLaMA3-70B on 8xA800 from the paper's model")
	f.StringVar(&c.DecodeProfile, "decode-profile", "", "decode profile CSV (batch_size,kv_tokens,seconds); default: the built-in TBT model")
	f.IntVar(&o.Limits.MaxTokens, "max-tokens", o.Limits.MaxTokens, "most tokens one schedule or query request may carry")
	f.IntVar(&o.Limits.MaxKeys, "max-keys", o.Limits.MaxKeys, "most keys one request or block update may carry")
	f.Var(engineFlag{&r.Engines}, "engine", "an engine to route to, repeatable: id=e0,url=http://host:8000[,events=tcp://host:5557][,replay=tcp://host:5558][,role=both|prefill|decode][,node=http://host:8080]; with engines the conductor serves /v1/completions, /v1/chat/completions and /v1/models")
	f.StringVar(&r.Model, "model", "", "model name the router serves (with --engine)")
	f.StringVar(&r.Namespace, "namespace", "", "key namespace tenant/model of the engines' prompts (with --engine)")
	f.StringVar(&r.Encoding, "encoding", rd.Encoding, "tokenizer of text prompts: cl100k_base, o200k_base, p50k_base or r50k_base")
	f.StringVar(&r.Tokenize, "tokenize", rd.Tokenize, "where text prompts' and chats' token ids come from: auto (local when the engines' /tokenize agrees with it, else theirs), local or engine")
	f.StringSliceVar(&r.Pool, "pool", nil, "yuebing node HTTP bases whose cluster index the router queries, repeatable")
	f.StringVar(&r.PoolToken, "pool-token", "", "admin token for the pool nodes' API")
	f.StringVar(&r.EngineAPIKey, "engine-api-key", "", "bearer token the engines were started with (vLLM's --api-key); without it the client's Authorization is passed on")
	f.DurationVar(&r.SpeculativeTTL, "speculative-ttl", rd.SpeculativeTTL, "how long a routing decision counts the prompt as cached on its engine before events confirm it")
	f.DurationVar(&r.ProbeInterval, "probe-interval", rd.ProbeInterval, "how often engines' /metrics are read")
	f.IntVar(&r.ProbeFailures, "probe-failures", rd.ProbeFailures, "unanswered /metrics probes in a row that take an engine out (a refused connection does at once)")
	f.DurationVar(&r.RetryAfter, "retry-after", rd.RetryAfter, "Retry-After of a 429 from early rejection")
	f.IntVar(&r.MaxPromptBytes, "max-prompt-bytes", rd.MaxPromptBytes, "longest text prompt (a completion's string, a chat's messages) tokenized; longer ones get 400")
	f.IntVar(&r.MaxConcurrentPrepares, "max-concurrent-prepares", 0, "requests read and tokenized at once, the rest waiting their turn (0: GOMAXPROCS)")
	markFields(f, map[string]string{
		"auth-tokens-file": "auth.tokens_file", "insecure": "insecure", "policy": "policy", "rejection": "rejection",
		"block-size": "block_size", "threshold": "balancing_threshold", "bandwidth": "bandwidth_gbps",
		"kv-bytes-per-token": "kv_bytes_per_token", "ttft-slo": "ttft_slo", "tbt-slo": "tbt_slo", "td": "decode_time",
		"prefill-profile": "prefill_profile", "decode-profile": "decode_profile",
	})
}

// markFields marks each flag with the YAML name of the field it sets.
func markFields(f *pflag.FlagSet, fields map[string]string) {
	for flag, field := range fields {
		if err := f.SetAnnotation(flag, yamlAnnotation, []string{field}); err != nil {
			panic("BUG: " + err.Error())
		}
	}
}

// flagNamer names a field by the flag marked with its YAML name, or by the
// YAML name where no flag sets it.
func flagNamer(f *pflag.FlagSet) func(yamlName string) string {
	return func(yamlName string) string {
		name := yamlName
		f.VisitAll(func(fl *pflag.Flag) {
			if a := fl.Annotations[yamlAnnotation]; len(a) == 1 && a[0] == yamlName {
				name = "--" + fl.Name
			}
		})
		return name
	}
}

// sizeVar binds a byte-size flag. Zero prints as no default, for the
// fields whose default is derived later.
func sizeVar(f *pflag.FlagSet, p *ByteSize, name, usage string) {
	f.Var(sizeFlag{p}, name, usage)
}

type sizeFlag struct{ p *ByteSize }

func (s sizeFlag) String() string {
	if s.p == nil || *s.p == 0 {
		return ""
	}
	b, _ := s.p.MarshalText()
	return string(b)
}

func (s sizeFlag) Set(v string) error { return s.p.UnmarshalText([]byte(v)) }
func (s sizeFlag) Type() string       { return "size" }

// intsFlag sets several fields to one value: --block-size is the
// conductor's and, with engines, the router's, whose defaults differ.
type intsFlag struct{ first, rest *int }

func (f intsFlag) String() string {
	if f.first == nil {
		return ""
	}
	return fmt.Sprint(*f.first)
}

func (f intsFlag) Set(v string) error {
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	*f.first, *f.rest = n, n
	return nil
}

func (f intsFlag) Type() string { return "int" }

// engineFlag is a repeatable --engine: id=e0,url=http://host:8000 and
// optionally events=tcp://host:5557,replay=tcp://host:5558,role=both,node=http://host:8080.
type engineFlag struct{ engines *[]router.Engine }

func (f engineFlag) String() string { return "" }
func (f engineFlag) Type() string   { return "engine" }

func (f engineFlag) Set(s string) error {
	var e router.Engine
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q: want key=value pairs separated by commas", kv)
		}
		switch k {
		case "id":
			e.ID = v
		case "url":
			e.URL = v
		case "events":
			e.Events = v
		case "replay":
			e.Replay = v
		case "role":
			e.Role = v
		case "node":
			e.Node = v
		default:
			return fmt.Errorf("unknown key %q: want id, url, events, replay, role or node", k)
		}
	}
	if e.ID == "" || e.URL == "" {
		return fmt.Errorf("%q: id and url are required", s)
	}
	*f.engines = append(*f.engines, e)
	return nil
}
