package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/bytesize"
	"github.com/yuebing/yuebing/scheduler"
	"github.com/yuebing/yuebing/server/staging"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/policy"
	"github.com/yuebing/yuebing/tier/s3"
	"github.com/yuebing/yuebing/tier/ssd"
)

// Config is everything `yuebing serve` needs. It is filled from defaults,
// then a YAML file, then YUEBING_* environment variables, then flags (later
// wins); EnsureDefaults derives what is left at zero and Validate reports
// every problem at once, each naming its field as the YAML file spells it.
type Config struct {
	HTTP ListenerConfig `yaml:"http"`
	// RESP is the Redis-protocol front end. Empty listen disables it.
	RESP RESPConfig `yaml:"resp"`
	// Transfer is the block transfer service between nodes. Empty listen
	// disables it.
	Transfer ListenerConfig `yaml:"transfer"`
	// Shm hands clients on the same host shared-memory staging segments
	// over a unix socket (docs/python.md). Empty listen disables it.
	Shm ShmConfig `yaml:"shm"`
	// Insecure allows a non-loopback listener without authentication.
	Insecure bool `yaml:"insecure"`
	// DataDir holds the SSD tier and the contexts file. Default
	// ./yuebing-data.
	DataDir string `yaml:"data_dir"`
	// DataDirLockWait bounds how long start-up waits for another process
	// holding DataDir (its yuebing.lock) to let it go, as a node killed a
	// moment ago does while the kernel tears it down; past it the node
	// refuses to start, naming the holder's pid and command line. Default
	// 10s.
	DataDirLockWait time.Duration `yaml:"data_dir_lock_wait"`
	DRAM            DRAMConfig    `yaml:"dram"`
	SSD             SSDConfig     `yaml:"ssd"`
	// S3 is the object tier below SSD (docs/operations.md, "The S3
	// tier"); off unless s3.bucket or s3.endpoint is set. Credentials come
	// from s3.credentials_file or the AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY variables, never from this file.
	S3       s3.Options     `yaml:"s3"`
	Auth     AuthConfig     `yaml:"auth"`
	Limits   Limits         `yaml:"limits"`
	Contexts ContextsConfig `yaml:"contexts"`
	// Retention bounds hard pins per namespace (docs/retention.md).
	Retention RetentionOptions `yaml:"retention"`
	Conductor ConductorConfig  `yaml:"conductor"`
	// Router puts the embedded conductor in front of inference engines as
	// an OpenAI-compatible router (/v1/completions, /v1/chat/completions,
	// /v1/models); no engines means none.
	Router  RouterConfig  `yaml:"router"`
	Cluster ClusterConfig `yaml:"cluster"`
	Log     LogConfig     `yaml:"log"`
	// Console configures the operator console at /ui/.
	Console ConsoleConfig `yaml:"console"`

	// Logger overrides Log. Default: a handler on stderr as Log says.
	Logger *slog.Logger `yaml:"-"`
	// Banner receives the start-up banner. Default os.Stdout; io.Discard
	// silences it.
	Banner io.Writer `yaml:"-"`
	// Version is printed in the banner.
	Version string `yaml:"-"`
}

// ConsoleConfig configures the operator console (docs/console.md).
type ConsoleConfig struct {
	// HistoryInterval is how often the counters the console charts are
	// sampled; the last 120 samples are kept. Default 5s.
	HistoryInterval time.Duration `yaml:"history_interval"`
}

// ListenerConfig is one network listener.
type ListenerConfig struct {
	// Listen is host:port; empty disables the listener.
	Listen string `yaml:"listen"`
}

// RESPConfig configures the Redis-protocol front end (docs/resp.md).
type RESPConfig struct {
	// Listen is host:port; empty disables the front end.
	Listen string `yaml:"listen"`
	// InlineMax is the longest value kept inline, in the key table
	// rather than in a block of the store, in bytes. Default (0): 1024;
	// negative keeps every value in a block.
	InlineMax int `yaml:"inline_max"`
	// InlineCapacity bounds the memory of inline values (keys, values and
	// table entries), which they take from the DRAM tier's capacity.
	// Default (0): half of dram.capacity.
	InlineCapacity ByteSize `yaml:"inline_capacity"`
	// EventLoop serves connections from epoll event loops rather than a
	// goroutine each (Linux only; docs/resp.md, "Event loop"). Default:
	// true on Linux, where the loops spend less CPU per small command
	// (docs/benchmarks.md); false elsewhere.
	EventLoop bool `yaml:"event_loop"`
	// EventLoops is the number of event loops. Default (0): GOMAXPROCS/2, at least 1.
	EventLoops int `yaml:"event_loops"`
}

// ShmConfig configures the shared-memory staging service: staging.Options,
// whose YAML names are the shm section's. Listen may also be "auto" (the
// default), an abstract socket named after the process; empty disables
// the service. MaxOwnerSessions and MaxOwnerBytes are the per-tenant
// quotas (max_sessions_per_tenant, max_bytes_per_tenant), not applied with
// authentication off, where every client is one principal and only the
// totals apply.
type ShmConfig = staging.Options

// DRAMConfig configures the DRAM tier: dram.Options' settings, and the
// capacity, whose default the server derives from the machine.
type DRAMConfig struct {
	// Capacity of the arena. Default (0): min(4 GiB, 25% of RAM).
	Capacity     ByteSize `yaml:"capacity"`
	dram.Options `yaml:",inline"`
}

// SSDConfig configures the SSD tier, kept under DataDir/ssd: ssd.Options'
// settings, and the capacity, whose default the server derives from the
// data directory's filesystem.
type SSDConfig struct {
	// Capacity of the segment files. Default (0): min(64 GiB, 50% of the
	// free disk of the data directory's filesystem, counting what the tier
	// already holds as free).
	Capacity        ByteSize `yaml:"capacity"`
	ssd.Options     `yaml:",inline"`
	AdmissionConfig `yaml:",inline"`
}

// AuthConfig configures authentication.
type AuthConfig struct {
	// TokensFile maps bearer tokens to {tenant, role}; empty turns
	// authentication off (every caller is an admin of tenant "default").
	TokensFile string `yaml:"tokens_file"`
}

// Limits bound what one request, and all of them together, may use.
type Limits struct {
	// MaxBlockSize is the largest block. Default 256MiB, or less when no
	// tier could hold that: the larger of dram.capacity and half of
	// ssd.capacity.
	MaxBlockSize ByteSize `yaml:"max_block_size"`
	// MaxBatchKeys is the most keys in a batch call or context. Default 4096.
	MaxBatchKeys int `yaml:"max_batch_keys"`
	// MaxBatchBytes is the most block bytes in one multi-put or multi-get.
	// Default 256MiB.
	MaxBatchBytes ByteSize `yaml:"max_batch_bytes"`
	// MaxJSONBytes is the largest JSON request body. Default 8MiB, room for
	// about a million token ids.
	MaxJSONBytes ByteSize `yaml:"max_json_bytes"`
	// MaxInflightBytes bounds the block bytes that requests in flight may
	// hold in the Go heap: bodies on their way to the SSD tier and copies
	// read from it. One budget serves the node's front ends together: HTTP
	// requests, the Redis front end's values and reads, and blocks fetched
	// from other nodes. A request that cannot get its share within
	// QueueTimeout is answered 429 (HTTP) or -ERR (Redis). Default 1GiB.
	MaxInflightBytes ByteSize `yaml:"max_inflight_bytes"`
	// MaxConnections bounds open HTTP connections; more wait in the
	// kernel's accept queue. Default 4096.
	MaxConnections int `yaml:"max_connections"`
	// RequestTimeout bounds one request, reading its body and writing its
	// answer included. Default 60s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// QueueTimeout is how long a request waits for its share of
	// MaxInflightBytes before it is refused. Default 1s.
	QueueTimeout time.Duration `yaml:"queue_timeout"`
	// ShutdownTimeout bounds draining requests in flight and flushing DRAM
	// to SSD on shutdown. Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
}

// ContextsConfig configures the context cache.
type ContextsConfig struct {
	// MaxTTL is the longest TTL a context may ask for. Default 24h.
	MaxTTL time.Duration `yaml:"max_ttl"`
	// MaxContexts bounds live contexts. Default 10000.
	MaxContexts int `yaml:"max_contexts"`
}

// ConductorConfig configures the conductor (docs/conductor.md), embedded at
// /v1/conductor or run alone by `yuebing conductor`: the same knobs and the
// same defaults either way, those of scheduler.Options, whose YAML names
// are the section's. The fields here are the ones whose spelling differs
// from scheduler.Options': Config.Validate turns them into its Bandwidth,
// Prefill and Decode, and scheduler.Options.Validate checks the result,
// which is what the conductor runs with. Zero fields take the scheduler's
// defaults; fields set programmatically that have no YAML name (Seed,
// DefaultOutputTokens, Logger) are kept.
type ConductorConfig struct {
	// Enabled mounts the conductor's endpoints. Default true.
	Enabled bool `yaml:"enabled"`
	// Policy is cache-global (alias conductor: Algorithm 1), load
	// (least_loaded), round-robin (round_robin), cache-local or random:
	// Options' Policy by name. Default cache-global.
	Policy string `yaml:"policy"`
	// Rejection is none, early or predicted: Options' Rejection by name.
	// Default predicted.
	Rejection string `yaml:"rejection"`
	// Options are the scheduler's: block_size, balancing_threshold,
	// ttft_slo, tbt_slo, decode_time and kv_bytes_per_token.
	scheduler.Options `yaml:",inline"`
	// BandwidthGbps is the KV transfer bandwidth between instances, Options'
	// Bandwidth in Gbps. Default 800.
	BandwidthGbps float64 `yaml:"bandwidth_gbps"`
	// PrefillProfile is a CSV of input_len,prefix_len,seconds to fit the
	// prefill model to. Default: LLaMA3-70B on 8xA800 from the paper's
	// model.
	PrefillProfile string `yaml:"prefill_profile"`
	// DecodeProfile is a CSV of batch_size,kv_tokens,seconds to fit the
	// decode model to. Default: the built-in TBT model.
	DecodeProfile string `yaml:"decode_profile"`
}

// DefaultConductorConfig returns the conductor's defaults: enabled, with
// scheduler.Options' defaults.
func DefaultConductorConfig() ConductorConfig {
	c := ConductorConfig{Enabled: true}
	c.ensureDefaults()
	return c
}

// resolve turns the fields into c.Options and validates them, once, with
// scheduler.Options.Validate. bad gets each problem with the YAML name of
// its field ("" for an option that has none).
func (c *ConductorConfig) resolve(bad func(field, format string, args ...any)) {
	o := c.Options
	o.Bandwidth = c.BandwidthGbps * 1e9 / 8
	var err error
	if o.Policy, err = scheduler.ParsePolicy(c.Policy); err != nil {
		bad("policy", "%q: want %s", c.Policy, scheduler.PolicyNames)
	}
	if o.Rejection, err = scheduler.ParseRejection(c.Rejection); err != nil {
		bad("rejection", "%q: want none, early or predicted", c.Rejection)
	}
	if err := block.ValidateBlockSize(o.BlockSize); err != nil {
		bad("block_size", "%d: want %d to %d", o.BlockSize, block.MinBlockSize, block.MaxBlockSize)
	}
	if c.PrefillProfile != "" {
		if o.Prefill, err = loadProfile(c.PrefillProfile, scheduler.ParsePrefillProfile); err != nil {
			bad("prefill_profile", "%v", err)
		}
	}
	if c.DecodeProfile != "" {
		if o.Decode, err = loadProfile(c.DecodeProfile, scheduler.ParseDecodeProfile); err != nil {
			bad("decode_profile", "%v", err)
		}
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		for _, e := range unjoin(err) {
			var oe *scheduler.OptionError
			if errors.As(e, &oe) {
				bad(conductorField(oe.Field), "%v", e)
			} else {
				bad("", "%v", e)
			}
		}
	}
	c.Options = o
}

// conductorField names the YAML field of a scheduler.Options field: its
// tag, or the ConductorConfig field it is resolved from; "" for one that
// has none.
func conductorField(field string) string {
	switch field {
	case "Policy":
		return "policy"
	case "Rejection":
		return "rejection"
	case "Bandwidth":
		return "bandwidth_gbps"
	}
	f, ok := reflect.TypeFor[scheduler.Options]().FieldByName(field)
	if tag := f.Tag.Get("yaml"); ok && tag != "-" {
		return tag
	}
	return ""
}

// unjoin returns the errors errors.Join joined, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func loadProfile[M any](path string, parse func(io.Reader) (M, error)) (M, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero M
		return zero, err
	}
	defer f.Close()
	return parse(f)
}

// LogConfig configures logging to stderr.
type LogConfig struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
}

// Default listen addresses.
const (
	DefaultHTTPListen     = "127.0.0.1:8080"
	DefaultRESPListen     = "127.0.0.1:6380"
	DefaultTransferListen = "127.0.0.1:7070"
	DefaultDataDir        = "./yuebing-data"
)

// DefaultConfig returns the configuration of `yuebing serve` with no flags.
// Listeners are set here rather than in EnsureDefaults, so that a file,
// variable or flag setting one to "" disables it.
func DefaultConfig() Config {
	return Config{
		HTTP:      ListenerConfig{Listen: DefaultHTTPListen},
		RESP:      RESPConfig{Listen: DefaultRESPListen, EventLoop: runtime.GOOS == "linux"},
		Transfer:  ListenerConfig{Listen: DefaultTransferListen},
		Shm:       ShmConfig{Listen: "auto"},
		Conductor: DefaultConductorConfig(),
	}
}

// EnsureDefaults fills zero fields. Capacities left at zero are derived
// from the machine: RAM for DRAM, the data directory's filesystem for SSD.
func (c *Config) EnsureDefaults() {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.DataDirLockWait == 0 {
		c.DataDirLockWait = 10 * time.Second
	}
	if c.DRAM.Capacity == 0 {
		c.DRAM.Capacity = ByteSize(defaultDRAMCapacity())
	}
	c.DRAM.ensureDefaults()
	if c.Console.HistoryInterval == 0 {
		c.Console.HistoryInterval = 5 * time.Second
	}
	if c.SSD.Capacity == 0 {
		c.SSD.Capacity = ByteSize(defaultSSDCapacity(filepath.Join(c.DataDir, "ssd")))
	}
	c.SSD.ensureDefaults()
	if c.Limits.MaxBlockSize == 0 {
		// The largest block some tier can take: small test and edge
		// nodes work without setting it.
		c.Limits.MaxBlockSize = min(256<<20, max(c.DRAM.Capacity, c.SSD.Capacity/2))
	}
	c.Limits.ensureDefaults()
	if c.Contexts.MaxTTL == 0 {
		c.Contexts.MaxTTL = 24 * time.Hour
	}
	if c.Contexts.MaxContexts == 0 {
		c.Contexts.MaxContexts = 10000
	}
	ensureShmDefaults(&c.Shm)
	c.Conductor.ensureDefaults()
	c.Cluster.ensureDefaults()
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Banner == nil {
		c.Banner = os.Stdout
	}
}

// ensureDefaults fills the conductor's zero settings with
// scheduler.Options' defaults. The fields without a YAML name are left to
// Validate, which derives Bandwidth and the per-source bandwidths from
// bandwidth_gbps and loads the models.
func (c *ConductorConfig) ensureDefaults() {
	o := c.Options
	o.EnsureDefaults()
	if c.Policy == "" {
		c.Policy = o.Policy.String()
	}
	if c.Rejection == "" {
		c.Rejection = o.Rejection.String()
	}
	if c.BandwidthGbps == 0 {
		c.BandwidthGbps = o.Bandwidth * 8 / 1e9
	}
	o.Prefill, o.Decode, o.Bandwidth, o.SourceBandwidth = c.Prefill, c.Decode, c.Bandwidth, c.SourceBandwidth
	o.DefaultOutputTokens, o.Logger = c.DefaultOutputTokens, c.Logger
	c.Options = o
}

// ensureShmDefaults fills the shm section's zero settings with
// staging.Options' defaults, derived there from the settings given; the
// fields without a YAML name are left to the service.
func ensureShmDefaults(c *ShmConfig) {
	o := *c
	o.EnsureDefaults()
	o.Authenticate, o.Handle, o.Logger = c.Authenticate, c.Handle, c.Logger
	o.MaxRegions, o.MaxRequestBytes = c.MaxRegions, c.MaxRequestBytes
	*c = o
}

// ensureDefaults fills the settings the dram section prints with
// dram.Options' defaults.
func (c *DRAMConfig) ensureDefaults() {
	o := c.Options
	o.EnsureDefaults()
	c.Policy = o.Policy
}

// ensureDefaults fills the settings the ssd section prints with
// ssd.Options' defaults.
func (c *SSDConfig) ensureDefaults() {
	o := c.Options
	o.EnsureDefaults()
	c.Compression = o.Compression
}

func (l *Limits) ensureDefaults() {
	if l.MaxBlockSize == 0 {
		l.MaxBlockSize = 256 << 20
	}
	if l.MaxBatchKeys == 0 {
		l.MaxBatchKeys = 4096
	}
	if l.MaxBatchBytes == 0 {
		l.MaxBatchBytes = 256 << 20
	}
	if l.MaxJSONBytes == 0 {
		l.MaxJSONBytes = 8 << 20
	}
	if l.MaxInflightBytes == 0 {
		l.MaxInflightBytes = 1 << 30
	}
	if l.MaxConnections == 0 {
		l.MaxConnections = 4096
	}
	if l.RequestTimeout == 0 {
		l.RequestTimeout = 60 * time.Second
	}
	if l.QueueTimeout == 0 {
		l.QueueTimeout = time.Second
	}
	if l.ShutdownTimeout == 0 {
		l.ShutdownTimeout = 30 * time.Second
	}
}

// Minimum capacities: below these a tier cannot hold a useful block.
const (
	minDRAMCapacity = 1 << 20
	minSSDCapacity  = 1 << 20
)

// Validate reports every invalid field, each naming the field and what it
// may be.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...)))
	}
	if c.Console.HistoryInterval < 0 || c.Console.HistoryInterval > 0 && c.Console.HistoryInterval < 100*time.Millisecond {
		bad("console.history_interval", "%v: want 100ms or more (or 0 for the default 5s)", c.Console.HistoryInterval)
	}
	if c.HTTP.Listen == "" {
		bad("http.listen", "required: the HTTP API is the node's main interface (host:port, e.g. %s)", DefaultHTTPListen)
	}
	for _, l := range []struct {
		field, addr string
	}{{"http.listen", c.HTTP.Listen}, {"resp.listen", c.RESP.Listen}, {"transfer.listen", c.Transfer.Listen}} {
		if l.addr == "" {
			continue
		}
		if err := checkListen(l.addr); err != nil {
			bad(l.field, "%q: %v", l.addr, err)
			continue
		}
		if c.Auth.TokensFile == "" && !c.Insecure && !isLoopback(l.addr) {
			bad(l.field, "%q is not a loopback address and authentication is off: set auth.tokens_file (--auth-tokens-file) or insecure (--insecure)", l.addr)
		}
	}
	if c.DataDir == "" {
		bad("data_dir", "required")
	}
	if c.Shm.Listen != "" {
		if c.Shm.MaxSessionBytes <= 0 || c.Shm.MaxBytes <= 0 || c.Shm.MaxSessionBytes > c.Shm.MaxBytes {
			bad("shm.max_session_bytes", "%s must be positive and at most shm.max_bytes (%s)", c.Shm.MaxSessionBytes, c.Shm.MaxBytes)
		}
		if c.Shm.MaxSessions <= 0 {
			bad("shm.max_sessions", "%d must be positive", c.Shm.MaxSessions)
		}
		if c.Shm.MaxOwnerSessions <= 0 {
			bad("shm.max_sessions_per_tenant", "%d must be positive", c.Shm.MaxOwnerSessions)
		}
		if c.Shm.MaxOwnerBytes <= 0 {
			bad("shm.max_bytes_per_tenant", "%s must be positive", c.Shm.MaxOwnerBytes)
		}
		if c.Shm.MaxPending <= 0 {
			bad("shm.max_pending", "%d must be positive", c.Shm.MaxPending)
		}
		if c.Shm.HelloTimeout <= 0 {
			bad("shm.hello_timeout", "%v must be positive", c.Shm.HelloTimeout)
		}
	}
	if c.DRAM.Capacity < minDRAMCapacity {
		bad("dram.capacity", "%s is below the minimum of %s", c.DRAM.Capacity, ByteSize(minDRAMCapacity))
	}
	if !slices.Contains(policy.Names, c.DRAM.Policy) {
		bad("dram.policy", "%q: want one of %s", c.DRAM.Policy, strings.Join(policy.Names, ", "))
	}
	if c.SSD.Capacity < minSSDCapacity {
		bad("ssd.capacity", "%s is below the minimum of %s", c.SSD.Capacity, ByteSize(minSSDCapacity))
	}
	c.SSD.AdmissionConfig.validate(bad)
	if _, err := block.ParseCodec(c.SSD.Compression); err != nil {
		bad("ssd.compression", "%q: want none, s2 or zstd", c.SSD.Compression)
	}
	l := c.Limits
	if l.MaxBlockSize <= 0 || l.MaxBlockSize > block.MaxPayload {
		bad("limits.max_block_size", "%s: want 1B to 4GiB", l.MaxBlockSize)
	} else if l.MaxBlockSize > c.DRAM.Capacity && l.MaxBlockSize > c.SSD.Capacity/2 {
		bad("limits.max_block_size", "%s fits neither dram.capacity %s nor half of ssd.capacity %s", l.MaxBlockSize, c.DRAM.Capacity, c.SSD.Capacity)
	}
	if l.MaxBatchKeys < 1 || l.MaxBatchKeys > 1<<20 {
		bad("limits.max_batch_keys", "%d: want 1 to 1048576", l.MaxBatchKeys)
	}
	if l.MaxBatchBytes < 1 {
		bad("limits.max_batch_bytes", "%s: must be positive", l.MaxBatchBytes)
	}
	if l.MaxJSONBytes < 1<<10 {
		bad("limits.max_json_bytes", "%s: want at least 1KiB", l.MaxJSONBytes)
	}
	if l.MaxInflightBytes < l.MaxBlockSize || l.MaxInflightBytes < l.MaxBatchBytes {
		bad("limits.max_inflight_bytes", "%s: must be at least limits.max_block_size (%s) and limits.max_batch_bytes (%s), or such requests could never run", l.MaxInflightBytes, l.MaxBlockSize, l.MaxBatchBytes)
	}
	if l.MaxConnections < 1 {
		bad("limits.max_connections", "%d: must be positive", l.MaxConnections)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"limits.request_timeout", l.RequestTimeout}, {"limits.queue_timeout", l.QueueTimeout}, {"limits.shutdown_timeout", l.ShutdownTimeout}, {"contexts.max_ttl", c.Contexts.MaxTTL}, {"data_dir_lock_wait", c.DataDirLockWait}} {
		if d.v <= 0 {
			bad(d.field, "%v: want a positive duration like 30s or 5m", d.v)
		}
	}
	if c.Contexts.MaxContexts < 1 {
		bad("contexts.max_contexts", "%d: must be positive", c.Contexts.MaxContexts)
	}
	if c.Conductor.Enabled {
		c.Conductor.resolve(func(field, format string, args ...any) {
			bad(strings.TrimSuffix("conductor."+field, "."), format, args...)
		})
	}
	if err := c.Retention.Validate(); err != nil {
		errs = append(errs, err)
	}
	c.validateCluster(bad)
	if c.S3.Enabled() {
		o := c.S3
		o.EnsureDefaults()
		if err := o.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
		}
	}
	if _, ok := logLevels[c.Log.Level]; !ok {
		bad("log.level", "%q: want debug, info, warn or error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", "%q: want text or json", c.Log.Format)
	}
	return errors.Join(errs...)
}

var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port, e.g. 127.0.0.1:8080")
	}
	if port == "" {
		return errors.New("missing port")
	}
	return nil
}

// isLoopback reports whether addr only listens on a loopback interface.
// An empty host means all interfaces.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LoadFile applies a YAML file to c. Fields the file does not set keep their
// values; unknown fields are errors, so a typo is not silently ignored.
func (c *Config) LoadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && err != io.EOF {
		return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, path, err)
	}
	return nil
}

// EnvPrefix starts every environment variable the server reads.
const EnvPrefix = "YUEBING_"

// ApplyEnv applies YUEBING_* variables from environ (as os.Environ returns
// it) to c. A variable is the field's YAML path in upper case with '_' for
// '.': YUEBING_HTTP_LISTEN, YUEBING_DRAM_CAPACITY, YUEBING_LIMITS_MAX_BATCH_KEYS.
// It returns the YUEBING_* variables that name no field, for a warning: other
// yuebing commands may read variables of their own.
func (c *Config) ApplyEnv(environ []string) (unknown []string, err error) {
	fields := map[string]reflect.Value{}
	collectEnvFields(reflect.ValueOf(c).Elem(), strings.TrimSuffix(EnvPrefix, "_"), fields)
	var errs []error
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		f, known := fields[name]
		if !known {
			unknown = append(unknown, name)
			continue
		}
		if f.Kind() == reflect.String {
			f.SetString(val)
			continue
		}
		node := yaml.Node{Kind: yaml.ScalarNode, Value: val}
		if err := node.Decode(f.Addr().Interface()); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, name, val, err))
		}
	}
	return unknown, errors.Join(errs...)
}

func collectEnvFields(v reflect.Value, prefix string, out map[string]reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		tag, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		f := v.Field(i)
		if opts == "inline" {
			collectEnvFields(f, prefix, out)
			continue
		}
		if tag == "" || tag == "-" {
			continue
		}
		name := prefix + "_" + strings.ToUpper(tag)
		if f.Kind() == reflect.Struct {
			collectEnvFields(f, name, out)
			continue
		}
		out[name] = f
	}
}

// EnvNames lists the environment variables ApplyEnv reads, sorted.
func EnvNames() []string {
	var c Config
	fields := map[string]reflect.Value{}
	collectEnvFields(reflect.ValueOf(&c).Elem(), strings.TrimSuffix(EnvPrefix, "_"), fields)
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// YAML returns the configuration as a YAML document. It holds no secrets:
// the tokens file is named, never read.
func (c *Config) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ByteSize is a byte count written as operators write it: "4GiB",
// "512MiB", "1048576"; the packages' Options use the same type.
type ByteSize = bytesize.Size
