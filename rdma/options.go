package rdma

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// MaxTokenLen is the longest cluster token accepted; it bounds the handshake
// frame a peer must buffer before it is authenticated.
const MaxTokenLen = 256

// Options configure an Engine. The zero value of every field except
// ClusterToken means its default.
type Options struct {
	// ClusterToken authenticates peers: both ends of every connection must
	// present the same token. Required; use at least 16 random bytes.
	ClusterToken string
	// Workers is how many requests run at once across all batches.
	// Default 64: a request mostly waits on the network, so this bounds
	// concurrency rather than CPU use.
	Workers int
	// QueueDepth bounds requests submitted but not yet started; Submit blocks
	// (honouring its context) when the queue is full. Default 4096.
	QueueDepth int
	// MaxBatchSize bounds the capacity of one batch. Default 4096.
	MaxBatchSize int
	// MaxBatches bounds batches allocated and not yet freed. Default 1024.
	MaxBatches int
	// RequestTimeout is the longest a request may take from submission to
	// completion, whatever the submit context allows. Default 30s.
	RequestTimeout time.Duration
	// Logger receives connection-level events. Default: discard.
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Workers == 0 {
		o.Workers = 64
	}
	if o.QueueDepth == 0 {
		o.QueueDepth = 4096
	}
	if o.MaxBatchSize == 0 {
		o.MaxBatchSize = 4096
	}
	if o.MaxBatches == 0 {
		o.MaxBatches = 1024
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Validate reports every invalid field at once.
func (o *Options) Validate() error {
	var errs []error
	if o.ClusterToken == "" {
		errs = append(errs, errors.New("rdma: ClusterToken is required"))
	}
	if len(o.ClusterToken) > MaxTokenLen {
		errs = append(errs, fmt.Errorf("rdma: ClusterToken is %d bytes, at most %d", len(o.ClusterToken), MaxTokenLen))
	}
	if o.Workers < 0 {
		errs = append(errs, fmt.Errorf("rdma: Workers %d is negative", o.Workers))
	}
	if o.QueueDepth < 0 {
		errs = append(errs, fmt.Errorf("rdma: QueueDepth %d is negative", o.QueueDepth))
	}
	if o.MaxBatchSize < 0 {
		errs = append(errs, fmt.Errorf("rdma: MaxBatchSize %d is negative", o.MaxBatchSize))
	}
	if o.MaxBatches < 0 {
		errs = append(errs, fmt.Errorf("rdma: MaxBatches %d is negative", o.MaxBatches))
	}
	if o.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("rdma: RequestTimeout %v is negative", o.RequestTimeout))
	}
	return errors.Join(errs...)
}
