package scheduler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// Limits bounds what one HTTP request may ask for.
type Limits struct {
	// MaxTokens bounds the tokens of a schedule or query request.
	// Default: 1<<21 (2M tokens, past every context window).
	MaxTokens int
	// MaxKeys bounds the keys of a request and of a block update.
	// Default: 65536.
	MaxKeys int
	// MaxBodyBytes bounds a request body. Default: 32 MiB (2M tokens as
	// JSON numbers, or 65536 keys of 64 hex characters, fit).
	MaxBodyBytes int64
}

// EnsureDefaults fills zero fields with their defaults.
func (l *Limits) EnsureDefaults() {
	if l.MaxTokens == 0 {
		l.MaxTokens = 1 << 21
	}
	if l.MaxKeys == 0 {
		l.MaxKeys = 1 << 16
	}
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = 32 << 20
	}
}

// Validate reports every problem at once.
func (l *Limits) Validate() error {
	var errs []error
	if l.MaxTokens < 1 {
		errs = append(errs, fmt.Errorf("%w: max tokens %d", ErrOptions, l.MaxTokens))
	}
	if l.MaxKeys < 1 {
		errs = append(errs, fmt.Errorf("%w: max keys %d", ErrOptions, l.MaxKeys))
	}
	if l.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("%w: max body %d bytes, want at least 1024", ErrOptions, l.MaxBodyBytes))
	}
	return errors.Join(errs...)
}

// chainRequest is the prompt part of schedule and query requests: either
// tokens under a namespace (the conductor computes the chained keys) or
// the keys themselves.
type chainRequest struct {
	Namespace string   `json:"namespace"`
	BlockSize int      `json:"block_size"`
	Tokens    []uint32 `json:"tokens"`
	Keys      []string `json:"keys"`
	// InputTokens is the prompt length when keys are given; default
	// len(keys) * the conductor's block size.
	InputTokens int `json:"input_tokens"`
}

// scheduleRequest is the body of POST /v1/conductor/schedule.
type scheduleRequest struct {
	chainRequest
	RequestID    string `json:"request_id"`
	OutputTokens int    `json:"output_tokens"`
}

// decodeStrict decodes one JSON object, refusing unknown fields and
// trailing data: a misspelt field must not silently mean its default.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrRequest, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the JSON object", ErrRequest)
	}
	return nil
}

// chain turns the prompt into keys and an input length. blockSize is the
// conductor's: keys computed from tokens must use it, or they would not
// match what instances reported.
func (r *chainRequest) chain(l Limits, blockSize int) ([]block.Key, int, error) {
	switch {
	case len(r.Tokens) > 0 && len(r.Keys) > 0:
		return nil, 0, fmt.Errorf("%w: give tokens or keys, not both", ErrRequest)
	case len(r.Tokens) > 0:
		if len(r.Tokens) > l.MaxTokens {
			return nil, 0, fmt.Errorf("%w: %d tokens, at most %d", ErrRequest, len(r.Tokens), l.MaxTokens)
		}
		bs := r.BlockSize
		if bs == 0 {
			bs = block.DefaultBlockSize
		}
		if bs != blockSize {
			return nil, 0, fmt.Errorf("%w: block_size %d; this conductor schedules %d-token blocks", ErrRequest, bs, blockSize)
		}
		if r.InputTokens != 0 {
			return nil, 0, fmt.Errorf("%w: input_tokens goes with keys; with tokens it is their count", ErrRequest)
		}
		keys, err := block.ChainKeys(r.Namespace, bs, r.Tokens)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrRequest, err)
		}
		return keys, len(r.Tokens), nil
	case len(r.Keys) > 0:
		if r.Namespace != "" || r.BlockSize != 0 {
			return nil, 0, fmt.Errorf("%w: namespace and block_size go with tokens; keys are already chained", ErrRequest)
		}
		if len(r.Keys) > l.MaxKeys {
			return nil, 0, fmt.Errorf("%w: %d keys, at most %d", ErrRequest, len(r.Keys), l.MaxKeys)
		}
		keys, err := parseKeys(r.Keys)
		if err != nil {
			return nil, 0, err
		}
		n := r.InputTokens
		if n == 0 {
			n = len(keys) * blockSize
		}
		if n < 1 || n > l.MaxTokens || len(keys) > (n+blockSize-1)/blockSize {
			return nil, 0, fmt.Errorf("%w: input_tokens %d for %d keys of %d-token blocks (at most %d tokens)", ErrRequest, r.InputTokens, len(keys), blockSize, l.MaxTokens)
		}
		return keys, n, nil
	}
	return nil, 0, fmt.Errorf("%w: no tokens and no keys", ErrRequest)
}

func parseKeys(in []string) ([]block.Key, error) {
	keys := make([]block.Key, len(in))
	for i, s := range in {
		k, err := block.ParseKey(s)
		if err != nil {
			return nil, fmt.Errorf("%w: keys[%d]: %w", ErrRequest, i, err)
		}
		keys[i] = k
	}
	return keys, nil
}

// DecodeScheduleRequest parses the body of POST /v1/conductor/schedule
// into a Request, enforcing l. blockSize is the conductor's block size.
func DecodeScheduleRequest(body []byte, l Limits, blockSize int) (Request, error) {
	var r scheduleRequest
	if err := decodeStrict(body, &r); err != nil {
		return Request{}, err
	}
	if len(r.RequestID) > 128 {
		return Request{}, fmt.Errorf("%w: request_id longer than 128 bytes", ErrRequest)
	}
	if r.OutputTokens < 0 || r.OutputTokens > l.MaxTokens {
		return Request{}, fmt.Errorf("%w: output_tokens %d out of [0, %d]", ErrRequest, r.OutputTokens, l.MaxTokens)
	}
	keys, n, err := r.chain(l, blockSize)
	if err != nil {
		return Request{}, err
	}
	return Request{ID: r.RequestID, Keys: keys, InputTokens: n, OutputTokens: r.OutputTokens}, nil
}

// DecodeQueryRequest parses the body of POST /v1/conductor/query.
func DecodeQueryRequest(body []byte, l Limits, blockSize int) ([]block.Key, error) {
	var r chainRequest
	if err := decodeStrict(body, &r); err != nil {
		return nil, err
	}
	keys, _, err := r.chain(l, blockSize)
	return keys, err
}

// blocksRequest is the body of POST /v1/conductor/instances/{id}/blocks.
type blocksRequest struct {
	Reset   bool     `json:"reset"`
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	// Tier of the added blocks: 0 (DRAM, the default) to 7.
	Tier int `json:"tier"`
}

// DecodeBlockUpdate parses the body of a block update.
func DecodeBlockUpdate(body []byte, l Limits) (BlockUpdate, error) {
	var r blocksRequest
	if err := decodeStrict(body, &r); err != nil {
		return BlockUpdate{}, err
	}
	if n := len(r.Added) + len(r.Removed); n > l.MaxKeys {
		return BlockUpdate{}, fmt.Errorf("%w: %d keys, at most %d per update", ErrRequest, n, l.MaxKeys)
	}
	if r.Tier < 0 || r.Tier >= index.MaxTiers {
		return BlockUpdate{}, fmt.Errorf("%w: tier %d, want 0 to %d", ErrRequest, r.Tier, index.MaxTiers-1)
	}
	added, err := parseKeys(r.Added)
	if err != nil {
		return BlockUpdate{}, fmt.Errorf("added: %w", err)
	}
	removed, err := parseKeys(r.Removed)
	if err != nil {
		return BlockUpdate{}, fmt.Errorf("removed: %w", err)
	}
	return BlockUpdate{Reset: r.Reset, Added: added, Removed: removed, Tiers: index.TierMask(0).With(r.Tier)}, nil
}

// heartbeatRequest is the body of POST /v1/conductor/instances/{id}/heartbeat.
type heartbeatRequest struct {
	QueueSeconds float64 `json:"queue_seconds"`
	Batch        int     `json:"batch"`
	KVTokens     int64   `json:"kv_tokens"`
}

// DecodeHeartbeat parses the body of a heartbeat.
func DecodeHeartbeat(body []byte) (Load, error) {
	var r heartbeatRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return Load{}, nil
	}
	if err := decodeStrict(body, &r); err != nil {
		return Load{}, err
	}
	if r.QueueSeconds < 0 || r.QueueSeconds > 1e6 || math.IsNaN(r.QueueSeconds) || r.Batch < 0 || r.Batch > 1<<20 || r.KVTokens < 0 || r.KVTokens > 1<<40 {
		return Load{}, fmt.Errorf("%w: queue_seconds in [0, 1e6], batch in [0, 2^20], kv_tokens in [0, 2^40]", ErrRequest)
	}
	return Load{QueueTime: time.Duration(r.QueueSeconds * 1e9), Batch: r.Batch, KVTokens: r.KVTokens}, nil
}

// DecodeInstance parses the body of POST /v1/conductor/instances.
func DecodeInstance(body []byte) (Instance, error) {
	var in Instance
	if err := decodeStrict(body, &in); err != nil {
		return Instance{}, err
	}
	return in, in.Validate()
}
