package scheduler

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/bytesize"
)

// Policy chooses the prefill instance of a request.
type Policy uint8

const (
	// PolicyCacheGlobal is Algorithm 1 of the Mooncake paper: per instance,
	// TTFT = transfer + queue + prefill, where an instance whose own prefix
	// is much shorter than the best one anywhere pulls the best one first
	// (kvcache_balancing_threshold); the minimum TTFT wins.
	PolicyCacheGlobal Policy = iota
	// PolicyCacheLocal is the paper's local cache-aware scheduling: TTFT =
	// queue + prefill with each instance's own prefix only, no pulls.
	PolicyCacheLocal
	// PolicyLoad sends a request to the instance with the least queued
	// prefill time; it still reuses whatever prefix that instance holds.
	PolicyLoad
	// PolicyRandom picks a prefill instance uniformly at random.
	PolicyRandom
	// PolicyRoundRobin takes the prefill instances in turn, blind to
	// caches and load; it still reuses whatever prefix the chosen one
	// holds.
	PolicyRoundRobin
)

var policyNames = [...]string{"cache-global", "cache-local", "load", "random", "round-robin"}

// policyAliases are the router's names for the policies it is compared
// under: the conductor (Algorithm 1 on live state) against the two
// cache-blind baselines.
var policyAliases = map[string]Policy{
	"conductor":    PolicyCacheGlobal,
	"least_loaded": PolicyLoad,
	"least-loaded": PolicyLoad,
	"round_robin":  PolicyRoundRobin,
}

func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// PolicyNames lists the names ParsePolicy takes, for messages.
const PolicyNames = "conductor (cache-global), least_loaded (load), round_robin (round-robin), cache-local or random"

// ParsePolicy parses a policy's name ("cache-global", "cache-local",
// "load", "random", "round-robin") or alias ("conductor", "least_loaded",
// "round_robin").
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if s == n {
			return Policy(i), nil
		}
	}
	if p, ok := policyAliases[s]; ok {
		return p, nil
	}
	return 0, fmt.Errorf("%w: policy %q, want %s", ErrOptions, s, PolicyNames)
}

// Rejection is the overload policy: when a request is refused.
type Rejection uint8

const (
	// RejectPredicted is prediction-based early rejection: the decode
	// check uses the batch predicted for when this request's prefill would
	// finish, with the requests whose prefill ends by then added and those
	// decoding for longer than the uniform decode time t_d removed.
	RejectPredicted Rejection = iota
	// RejectEarly refuses at arrival when the estimated TTFT exceeds its
	// SLO, or when the chosen decode instance's current batch, with this
	// request added, would run slower than the TBT SLO: the larger of the
	// prefill and the decode load decides.
	RejectEarly
	// RejectNone accepts everything; SLOs are only reported.
	RejectNone
)

var rejectionNames = [...]string{"predicted", "early", "none"}

func (r Rejection) String() string {
	if int(r) < len(rejectionNames) {
		return rejectionNames[r]
	}
	return fmt.Sprintf("Rejection(%d)", uint8(r))
}

// ParseRejection parses "none", "early" or "predicted".
func ParseRejection(s string) (Rejection, error) {
	for i, n := range rejectionNames {
		if s == n {
			return Rejection(i), nil
		}
	}
	return 0, fmt.Errorf("%w: rejection %q, want none, early or predicted", ErrOptions, s)
}

// MaxInstances bounds the registered instances of all roles: holder sets
// are fixed-size bitsets, so one prefix match computes every instance's
// prefix length in a single pass over the chain.
const MaxInstances = 256

// Options configures a Core. The zero value is valid after EnsureDefaults.
// The YAML names are those of the server configuration's conductor section;
// fields without one are set by programs only (the server's policy,
// rejection, bandwidth_gbps, prefill_profile and decode_profile become
// Policy, Rejection, Bandwidth, Prefill and Decode).
type Options struct {
	// Policy chooses prefill instances. Default: PolicyCacheGlobal.
	Policy Policy `yaml:"-"`
	// Rejection is the overload policy. Default: RejectPredicted.
	Rejection Rejection `yaml:"-"`
	// BlockSize is the tokens per block key. Default: block.DefaultBlockSize.
	BlockSize int `yaml:"block_size"`
	// BalancingThreshold is the paper's kvcache_balancing_threshold: an
	// instance pulls the best prefix from its holder when best_len /
	// its own prefix_len exceeds it. Default: 1.25, so a remote prefix
	// must be 25% longer than the local one to be worth a transfer.
	BalancingThreshold float64 `yaml:"balancing_threshold"`
	// TTFTSLO and TBTSLO are the service level objectives. Defaults: 30 s
	// and 100 ms (the paper's).
	TTFTSLO time.Duration `yaml:"ttft_slo"`
	TBTSLO  time.Duration `yaml:"tbt_slo"`
	// Prefill estimates prefill time. Default: DefaultPrefillModel().
	Prefill *PrefillModel `yaml:"-"`
	// Decode estimates decode iteration time. Default: DefaultDecodeModel().
	Decode *DecodeModel `yaml:"-"`
	// KVBytesPerToken sizes transfers. Default: 327680 (320 KiB, LLaMA3-70B:
	// 80 layers x 2 x 8 KV heads x 128 x 2 bytes).
	KVBytesPerToken bytesize.Size `yaml:"kv_bytes_per_token"`
	// Bandwidth is the transfer bandwidth between instances in bytes per
	// second. Default: 100e9 (800 Gbps: the paper's testbed has four 200
	// Gbps NICs per node, and 100 GB/s is also below its 128 GB/s
	// host-to-device bandwidth, Table 1's B = min(B_h2d, B_nic)).
	Bandwidth float64 `yaml:"-"`
	// SourceBandwidth is the transfer bandwidth by where a pulled prefix
	// sits, in bytes per second, indexed by Source; zero entries take
	// Bandwidth, except SourceSSD, which defaults to 4e9 (an NVMe drive's
	// sequential read, the slowest link of such a pull).
	SourceBandwidth [NumSources]float64 `yaml:"-"`
	// DecodeTime is the uniform decode time t_d of prediction-based
	// rejection: a request is assumed to leave its decode batch t_d after
	// joining it. Default: 30 s.
	DecodeTime time.Duration `yaml:"decode_time"`
	// DefaultOutputTokens is the expected output of a request that states
	// none; it sizes its KV footprint in a decode batch. Default: 512.
	DefaultOutputTokens int `yaml:"-"`
	// Seed seeds PolicyRandom. Default 0 is a fixed seed.
	Seed uint64 `yaml:"-"`
	// Logger receives debug events. Default: slog.Default().
	Logger *slog.Logger `yaml:"-"`
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.BlockSize == 0 {
		o.BlockSize = block.DefaultBlockSize
	}
	if o.BalancingThreshold == 0 {
		o.BalancingThreshold = 1.25
	}
	if o.TTFTSLO == 0 {
		o.TTFTSLO = 30 * time.Second
	}
	if o.TBTSLO == 0 {
		o.TBTSLO = 100 * time.Millisecond
	}
	if o.Prefill == nil {
		o.Prefill = DefaultPrefillModel()
	}
	if o.Decode == nil {
		o.Decode = DefaultDecodeModel()
	}
	if o.KVBytesPerToken == 0 {
		o.KVBytesPerToken = 320 << 10
	}
	if o.Bandwidth == 0 {
		o.Bandwidth = 100e9
	}
	for i := range o.SourceBandwidth {
		if o.SourceBandwidth[i] == 0 {
			o.SourceBandwidth[i] = o.Bandwidth
			if Source(i) == SourceSSD {
				o.SourceBandwidth[i] = min(o.Bandwidth, 4e9)
			}
		}
	}
	if o.DecodeTime == 0 {
		o.DecodeTime = 30 * time.Second
	}
	if o.DefaultOutputTokens == 0 {
		o.DefaultOutputTokens = 512
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every problem at once, each an *OptionError naming its
// field and wrapping ErrOptions.
func (o *Options) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &OptionError{Field: field, Err: fmt.Errorf("%w: "+format, append([]any{ErrOptions}, args...)...)})
	}
	if int(o.Policy) >= len(policyNames) {
		bad("Policy", "unknown policy %d", o.Policy)
	}
	if int(o.Rejection) >= len(rejectionNames) {
		bad("Rejection", "unknown rejection %d", o.Rejection)
	}
	if o.BlockSize < 1 || o.BlockSize > 1<<20 {
		bad("BlockSize", "block size %d tokens, want 1 to 2^20", o.BlockSize)
	}
	if math.IsNaN(o.BalancingThreshold) || o.BalancingThreshold < 1 {
		bad("BalancingThreshold", "balancing threshold %v, want at least 1 (a remote prefix no longer than the local one is never worth a pull)", o.BalancingThreshold)
	}
	if o.TTFTSLO <= 0 {
		bad("TTFTSLO", "TTFT SLO %v, want > 0", o.TTFTSLO)
	}
	if o.TBTSLO <= 0 {
		bad("TBTSLO", "TBT SLO %v, want > 0", o.TBTSLO)
	}
	if o.KVBytesPerToken < 1 {
		bad("KVBytesPerToken", "KV bytes per token %d, want > 0", o.KVBytesPerToken)
	}
	if !(o.Bandwidth > 0) || math.IsInf(o.Bandwidth, 0) {
		bad("Bandwidth", "bandwidth %v bytes/s, want a positive number", o.Bandwidth)
	}
	for i, bw := range o.SourceBandwidth {
		if !(bw > 0) || math.IsInf(bw, 0) {
			bad("SourceBandwidth", "%s bandwidth %v bytes/s, want a positive number", Source(i), bw)
		}
	}
	if o.DecodeTime <= 0 {
		bad("DecodeTime", "decode time t_d %v, want > 0", o.DecodeTime)
	}
	if o.DefaultOutputTokens < 1 {
		bad("DefaultOutputTokens", "default output tokens %d, want > 0", o.DefaultOutputTokens)
	}
	return errors.Join(errs...)
}

// OptionError is one problem Validate found: the Options field and what is
// wrong with it.
type OptionError struct {
	Field string
	Err   error
}

func (e *OptionError) Error() string { return e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }
