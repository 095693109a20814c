package router

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/tokenizer"
	"github.com/yuebing/yuebing/scheduler"
)

// Engine roles.
const (
	// RoleBoth engines run whole requests, prefill and decode.
	RoleBoth = "both"
	// RolePrefill and RoleDecode engines split requests: the prefill engine
	// computes the prompt's KV and saves it to the pool, the decode engine
	// loads it and generates.
	RolePrefill = "prefill"
	RoleDecode  = "decode"
)

// Engine is one inference engine behind the router.
type Engine struct {
	// ID names the engine: 1-128 characters of [A-Za-z0-9._:-]. Required.
	ID string `yaml:"id" json:"id"`
	// URL is its OpenAI-compatible HTTP base, "http://host:port". Required.
	URL string `yaml:"url" json:"url"`
	// Role is RoleBoth (default), RolePrefill or RoleDecode.
	Role string `yaml:"role" json:"role"`
	// Events is its vLLM KV events PUB socket, "tcp://host:port"; empty
	// means the router learns its cache only from its own decisions.
	Events string `yaml:"events" json:"events,omitempty"`
	// Replay is its replay ROUTER socket; empty means none.
	Replay string `yaml:"replay" json:"replay,omitempty"`
	// Node is the HTTP base of the yuebing node on the engine's host, where
	// pull plans copy a prefix to before the engine loads it; empty means
	// the engine fetches what it misses itself.
	Node string `yaml:"node" json:"node,omitempty"`
}

// Options configures a Router.
type Options struct {
	// Model is the model name clients ask for; requests naming another
	// model get 404. Required.
	Model string `yaml:"model"`
	// Namespace keys prompts ("tenant/model"); it must be the engines'.
	// Required.
	Namespace string `yaml:"namespace"`
	// BlockSize is the engines' KV block size in tokens, which prompts'
	// keys, the pool's and the scheduler's prefixes are counted in. An
	// engine whose KV events state another size is matched with keys of
	// its own (logged once, counted). Default: 512, as `yuebing engine-sim`
	// and Mooncake's traces; set it to the engines' (vLLM's own default is 16).
	BlockSize int `yaml:"block_size"`
	// Encoding is the BPE tokenizer of text prompts: cl100k_base (default),
	// o200k_base, p50k_base or r50k_base, all available offline.
	Encoding string `yaml:"encoding"`
	// Tokenize is where text prompts' and chats' token ids come from:
	// TokenizeAuto (default: the local tokenizer when an engine's
	// /tokenize agrees with it, else the engine's), TokenizeLocal or
	// TokenizeEngine.
	Tokenize string `yaml:"tokenize"`
	// TokenizeTimeout bounds one engine /tokenize call; past it the next
	// engine is asked, then the local tokenizer answers. Default: 2 s.
	TokenizeTimeout time.Duration `yaml:"tokenize_timeout"`
	// TokenCacheTokens bounds the token ids each tokenizer cache holds
	// (chat messages' local ids; engines' answers): negative keeps none.
	// Default: 1<<22 (16 MiB of ids each).
	TokenCacheTokens int `yaml:"token_cache_tokens"`
	// Engines behind the router. At least one that runs prefills.
	Engines []Engine `yaml:"engines,omitempty"`
	// Pool are HTTP bases of yuebing nodes; the router asks the first that
	// answers for the cluster index's prefix matches of each request.
	Pool []string `yaml:"pool,omitempty"`
	// PoolToken is the bearer token for the pool's admin API, if any.
	PoolToken string `yaml:"pool_token"`
	// EngineAPIKey, when set, is sent to engines as a bearer token (the
	// key an engine such as vLLM was started with, --api-key), in place of
	// any Authorization of the client's (WithClientHeaders).
	EngineAPIKey string `yaml:"engine_api_key"`
	// PoolTimeout bounds one index query; past it the request is placed
	// without pool hits. Default: 50 ms.
	PoolTimeout time.Duration `yaml:"pool_timeout"`
	// Scheduler configures Algorithm 1. BlockSize is set from BlockSize.
	Scheduler scheduler.Options `yaml:"-"`
	// Migrator carries out pull plans. Default: one that copies the blocks
	// to the target engine's Node through the cluster (see PullMigrator).
	Migrator scheduler.Migrator `yaml:"-"`
	// SpeculativeTTL is how long a decision counts the prompt's blocks as
	// cached on its engine before events confirm it. Default: 2 s.
	SpeculativeTTL time.Duration `yaml:"speculative_ttl"`
	// MaxSpeculative bounds the speculative entries of all engines.
	// Default: 1<<18.
	MaxSpeculative int `yaml:"max_speculative"`
	// ProbeInterval is how often each engine's /metrics is read, to correct
	// its queue estimate and to bring it back after a failure. Default: 1 s.
	ProbeInterval time.Duration `yaml:"probe_interval"`
	// ProbeFailures is how many probes in a row must go unanswered (time
	// out, or answer an error) before an engine is taken out: one slow
	// /metrics page on a busy engine is not a dead engine. A refused
	// connection takes it out at once, as a failed request does.
	// Default: 3.
	ProbeFailures int `yaml:"probe_failures"`
	// RetryAfter is the Retry-After of a 429. Default: 1 s.
	RetryAfter time.Duration `yaml:"retry_after"`
	// MaxBodyBytes bounds a request body. Default: 8 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxResponseBytes bounds a non-streamed response, which the router
	// reads whole so a failed engine can be retried. Default: 64 MiB.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// MaxPromptTokens bounds a prompt. Default: 1<<20.
	MaxPromptTokens int `yaml:"max_prompt_tokens"`
	// MaxPromptBytes bounds a text prompt (a completion's string, a chat's
	// rendered messages), checked before it is tokenized: BPE costs about
	// a CPU-second per MiB of one endless word. Default: 1 MiB (about
	// 170,000 tokens of English).
	MaxPromptBytes int `yaml:"max_prompt_bytes"`
	// MaxConcurrentPrepares bounds the requests read and tokenized at once
	// by Serve and Place; others wait their turn, or until their context
	// ends. Default: GOMAXPROCS, which keeps a flood of long prompts from
	// taking more than the CPUs' worth from everything else.
	MaxConcurrentPrepares int `yaml:"max_concurrent_prepares"`
	// Client calls engines and the pool. Default: a client without an
	// overall timeout (generations stream for minutes) and 5 s to connect.
	Client *http.Client `yaml:"-"`
	// Logger. Default: slog.Default().
	Logger *slog.Logger `yaml:"-"`
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.BlockSize == 0 {
		o.BlockSize = 512
	}
	if o.Encoding == "" {
		o.Encoding = "cl100k_base"
	}
	if o.Tokenize == "" {
		o.Tokenize = TokenizeAuto
	}
	if o.TokenizeTimeout == 0 {
		o.TokenizeTimeout = 2 * time.Second
	}
	if o.TokenCacheTokens == 0 {
		o.TokenCacheTokens = 1 << 22
	}
	if o.PoolTimeout == 0 {
		o.PoolTimeout = 50 * time.Millisecond
	}
	if o.SpeculativeTTL == 0 {
		o.SpeculativeTTL = 2 * time.Second
	}
	if o.MaxSpeculative == 0 {
		o.MaxSpeculative = 1 << 18
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = time.Second
	}
	if o.ProbeFailures == 0 {
		o.ProbeFailures = 3
	}
	if o.RetryAfter == 0 {
		o.RetryAfter = time.Second
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 8 << 20
	}
	if o.MaxResponseBytes == 0 {
		o.MaxResponseBytes = 64 << 20
	}
	if o.MaxPromptTokens == 0 {
		o.MaxPromptTokens = 1 << 20
	}
	if o.MaxPromptBytes == 0 {
		o.MaxPromptBytes = 1 << 20
	}
	if o.MaxConcurrentPrepares == 0 {
		o.MaxConcurrentPrepares = runtime.GOMAXPROCS(0)
	}
	for i := range o.Engines {
		if o.Engines[i].Role == "" {
			o.Engines[i].Role = RoleBoth
		}
	}
	o.Scheduler.BlockSize = o.BlockSize
	o.Scheduler.EnsureDefaults()
	if o.Client == nil {
		o.Client = defaultClient()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every problem at once.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrOptions}, args...)...))
	}
	if o.Model == "" {
		bad("empty model name")
	}
	if err := block.ValidateNamespace(o.Namespace); err != nil {
		bad("%v", err)
	}
	if err := block.ValidateBlockSize(o.BlockSize); err != nil {
		bad("%v", err)
	}
	if !tokenizer.Known(o.Encoding) {
		bad("encoding %q: want cl100k_base, o200k_base, p50k_base or r50k_base", o.Encoding)
	}
	switch o.Tokenize {
	case TokenizeAuto, TokenizeLocal, TokenizeEngine:
	default:
		bad("tokenize %q: want auto, local or engine", o.Tokenize)
	}
	if o.TokenizeTimeout <= 0 {
		bad("tokenize timeout %v must be positive", o.TokenizeTimeout)
	}
	seen := map[string]bool{}
	prefills := 0
	for i, e := range o.Engines {
		if err := (scheduler.Instance{ID: e.ID, Role: scheduler.RolePrefill}).Validate(); err != nil {
			bad("engine %d: %v", i, err)
		}
		if seen[e.ID] {
			bad("engine %q listed twice", e.ID)
		}
		seen[e.ID] = true
		if !httpURL(e.URL) {
			bad("engine %q: url %q, want http://host:port", e.ID, e.URL)
		}
		if e.Node != "" && !httpURL(e.Node) {
			bad("engine %q: node %q, want http://host:port", e.ID, e.Node)
		}
		switch e.Role {
		case RoleBoth, RolePrefill:
			prefills++
		case RoleDecode:
		default:
			bad("engine %q: role %q, want both, prefill or decode", e.ID, e.Role)
		}
		if e.Replay != "" && e.Events == "" {
			bad("engine %q: a replay socket without an events socket", e.ID)
		}
	}
	if prefills == 0 {
		bad("no engine runs prefills (role both or prefill)")
	}
	for _, p := range o.Pool {
		if !httpURL(p) {
			bad("pool node %q, want http://host:port", p)
		}
	}
	if o.PoolTimeout <= 0 || o.SpeculativeTTL <= 0 || o.ProbeInterval <= 0 || o.RetryAfter <= 0 {
		bad("pool timeout, speculative TTL, probe interval and retry-after must be positive")
	}
	if o.ProbeFailures < 1 {
		bad("probe failures must be at least 1")
	}
	if o.MaxSpeculative < 0 || o.MaxBodyBytes < 1024 || o.MaxResponseBytes < 1024 || o.MaxPromptTokens < 1 || o.MaxPromptBytes < 1 {
		bad("max speculative must be >= 0, max body and response >= 1 KiB, max prompt tokens and bytes >= 1")
	}
	if o.MaxConcurrentPrepares < 1 {
		bad("max concurrent prepares %d, want 1 or more", o.MaxConcurrentPrepares)
	}
	if err := o.Scheduler.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
