package replicate

import (
	"errors"
	"testing"
	"time"
)

func mustCore(t testing.TB, opts Options, loc Locations) *Core {
	t.Helper()
	c, err := NewCore(opts, loc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestNewCoreOptions: bad options are an error wrapping ErrOptions, never a
// panic; zero options get their defaults.
func TestNewCoreOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{"defaults", Options{}, true},
		{"buckets", Options{Buckets: maxBuckets + 1}, false},
		{"window", Options{Window: -time.Second}, false},
		{"keep ratio", Options{KeepRatio: 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCore(tc.opts, nil)
			if tc.ok != (err == nil) || tc.ok != (c != nil) {
				t.Fatalf("NewCore = %v, %v", c, err)
			}
			if !tc.ok && !errors.Is(err, ErrOptions) {
				t.Errorf("error %v does not wrap ErrOptions", err)
			}
		})
	}
}
