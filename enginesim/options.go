package enginesim

import (
	"github.com/yuebing/yuebing/kvevents"

	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/tokenizer"
	"github.com/yuebing/yuebing/scheduler"
)

// EventPublisher takes KV events; *kvevents.Publisher is one. Publish is
// called from the engine's loop and must not block for long.
type EventPublisher interface {
	Publish(events []kvevents.Event) error
}

// Options configure an Engine.
type Options struct {
	// Name shows in responses and metrics. Default "engine-sim".
	Name string
	// Model is the model name the OpenAI API reports. Default Layout.Name.
	Model string
	// Layout is the model's KV shape. Required.
	Layout adapter.Layout
	// Namespace keys the blocks ("tenant/model"); the Connector's must be
	// the same. Required.
	Namespace string
	// Device holds the KV pool, one page per block. Default: an hbmsim
	// device of PoolBlocks pages (the Engine closes it).
	Device adapter.Device
	// PoolBlocks sizes the default device. Default 256.
	PoolBlocks int
	// DisablePrefixCache turns the engine's own prefix cache off: every
	// block not loaded from yuebing is recomputed.
	DisablePrefixCache bool
	// Connector, when set, is the yuebing pool: Lookup, Load and Save.
	Connector *adapter.Connector
	// DisableLoadIfFaster loads every pool hit. By default (LoadIfFaster)
	// the engine loads a hit only when its estimated prefill with the load
	// ends sooner than recomputing those tokens: the load time comes from
	// the adapter's throughput measured on earlier loads, the prefill's
	// from the profile, as a real engine's connector would decide.
	DisableLoadIfFaster bool
	// Prefill gives the time a prefill of n tokens with a cached prefix of
	// p takes. Default scheduler.DefaultPrefillModel() (LLaMA3-70B on 8 x
	// A800).
	Prefill *scheduler.PrefillModel
	// TimeScale multiplies every simulated compute time, so a replay fits
	// a small machine. Default 1.
	TimeScale float64
	// DecodeStep is one decode iteration of the running batch, before
	// TimeScale. Default 30ms, a typical TBT of a 70B model.
	DecodeStep time.Duration
	// MaxRunning bounds the decode batch. Default 64.
	MaxRunning int
	// MaxWaiting bounds the queue of requests not yet prefilled; more are
	// refused with ErrOverloaded. Default 256.
	MaxWaiting int
	// MaxTokens bounds a request's generated tokens. Default 4096.
	MaxTokens int
	// Logger receives load and save problems. Default slog.Default().
	Logger *slog.Logger
	// Encoding is the BPE the engine tokenizes text with (internal/tokenizer:
	// cl100k_base, o200k_base, p50k_base or r50k_base, all offline); chats
	// are rendered with the yuebing-chat-v1 template. Default cl100k_base.
	Encoding string
	// ChatCacheTokens bounds the token ids of chat messages kept so a
	// conversation's earlier turns are not encoded again; negative keeps
	// none. Default 1<<20 (4 MiB of ids).
	ChatCacheTokens int
	// MaxPromptBytes bounds a text prompt or a rendered chat, checked
	// before it is tokenized (BPE costs about a CPU-second per MiB of one
	// endless word). Default 1 MiB.
	MaxPromptBytes int
	// Events, if set, receives the engine's KV events as vLLM publishes
	// them: BlockStored when a prompt's blocks join the prefix cache (with
	// their token ids and parent), BlockRemoved when the cache evicts them.
	// A router follows the engine's cache through them.
	Events EventPublisher
}

// EnsureDefaults fills the zero fields.
func (o *Options) EnsureDefaults() {
	if o.Name == "" {
		o.Name = "engine-sim"
	}
	if o.Model == "" {
		o.Model = o.Layout.Name
	}
	if o.PoolBlocks == 0 {
		o.PoolBlocks = 256
	}
	if o.Prefill == nil {
		o.Prefill = scheduler.DefaultPrefillModel()
	}
	if o.TimeScale == 0 {
		o.TimeScale = 1
	}
	if o.DecodeStep == 0 {
		o.DecodeStep = 30 * time.Millisecond
	}
	if o.MaxRunning == 0 {
		o.MaxRunning = 64
	}
	if o.MaxWaiting == 0 {
		o.MaxWaiting = 256
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = 4096
	}
	if o.Encoding == "" {
		o.Encoding = "cl100k_base"
	}
	if o.ChatCacheTokens == 0 {
		o.ChatCacheTokens = 1 << 20
	}
	if o.MaxPromptBytes == 0 {
		o.MaxPromptBytes = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every problem at once.
func (o *Options) Validate() error {
	var errs []error
	if err := o.Layout.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := block.ValidateNamespace(o.Namespace); err != nil {
		errs = append(errs, fmt.Errorf("%w: Namespace: %w", ErrInvalid, err))
	}
	if o.Device != nil && int64(o.Device.PageBytes()) < o.Layout.BlockBytes() {
		errs = append(errs, fmt.Errorf("%w: device pages of %d bytes hold no block of %d", ErrInvalid, o.Device.PageBytes(), o.Layout.BlockBytes()))
	}
	if !tokenizer.Known(o.Encoding) {
		errs = append(errs, fmt.Errorf("%w: Encoding %q, want one of %v", ErrInvalid, o.Encoding, tokenizer.Encodings))
	}
	if o.MaxPromptBytes < 1 {
		errs = append(errs, fmt.Errorf("%w: MaxPromptBytes %d must be positive", ErrInvalid, o.MaxPromptBytes))
	}
	if o.TimeScale < 0 || o.DecodeStep < 0 {
		errs = append(errs, fmt.Errorf("%w: TimeScale %v and DecodeStep %v must not be negative", ErrInvalid, o.TimeScale, o.DecodeStep))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"PoolBlocks", o.PoolBlocks}, {"MaxRunning", o.MaxRunning}, {"MaxWaiting", o.MaxWaiting}, {"MaxTokens", o.MaxTokens}} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("%w: %s %d must be positive", ErrInvalid, f.name, f.v))
		}
	}
	return errors.Join(errs...)
}
