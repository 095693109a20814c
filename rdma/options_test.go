package rdma

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	o := (&Options{ClusterToken: "t"}).EnsureDefaults()
	if o.Workers != 64 || o.QueueDepth != 4096 || o.MaxBatchSize != 4096 || o.MaxBatches != 1024 || o.RequestTimeout != 30*time.Second || o.Logger == nil {
		t.Fatalf("defaults %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestOptionsValidateReportsAll(t *testing.T) {
	o := Options{ClusterToken: strings.Repeat("x", MaxTokenLen+1), Workers: -1, QueueDepth: -1, MaxBatchSize: -1, MaxBatches: -1, RequestTimeout: -1}
	err := o.Validate()
	for _, want := range []string{"ClusterToken is 257 bytes", "Workers", "QueueDepth", "MaxBatchSize", "MaxBatches", "RequestTimeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
	if err := (&Options{}).Validate(); err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("missing token: %v", err)
	}
}

func TestCheckRange(t *testing.T) {
	f := func(size, off, n uint64, want error) {
		t.Helper()
		if err := CheckRange(size, off, n); !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Errorf("CheckRange(%d, %d, %d) = %v, want %v", size, off, n, err, want)
		}
	}
	f(10, 0, 10, nil)
	f(10, 9, 1, nil)
	f(10, 10, 1, ErrOutOfRange)
	f(10, 0, 11, ErrOutOfRange)
	f(10, 11, 0, ErrInvalidRequest)
	f(10, 5, 0, ErrInvalidRequest)
	f(10, 1<<63, 1<<63, ErrOutOfRange)
	f(1<<64-1, 1<<64-2, 1, nil)
	f(1<<64-1, 1<<64-1, 1, ErrOutOfRange)
	f(1<<64-1, 1, 1<<64-1, ErrOutOfRange)
}
