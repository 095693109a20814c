package resp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/yuebing/yuebing/bench"
)

// Flags are the settings of `yuebing bench resp-vs-redis` as written on
// its command line: Options with the sizes still as text.
type Flags struct {
	// Options holds the settings taken as they are (clients, pipeline,
	// ...); its Sizes, DRAMCapacity, SSDCapacity, Bytes, FlowChunkBytes
	// and MemoryDRAM are set from the fields below.
	Options
	// Sizes is a comma-separated list of value sizes ("4096,1MiB").
	Sizes string
	// DRAMCapacity, SSDCapacity, Bytes, FlowChunk and MemoryDRAM are byte
	// sizes ("2GiB"); empty leaves the default.
	DRAMCapacity, SSDCapacity, Bytes, FlowChunk, MemoryDRAM string
}

// Parse checks f, reporting every problem at once and naming its flag,
// and returns the options f sets.
func (f *Flags) Parse() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	o := f.Options
	o.Sizes = nil
	if f.Sizes != "" {
		for _, s := range strings.Split(f.Sizes, ",") {
			n, err := bench.ParseSize(s)
			if err != nil || n <= 0 {
				bad("--sizes: %q is not a size like 4096 or 1MiB", s)
				continue
			}
			o.Sizes = append(o.Sizes, n)
		}
	}
	for _, s := range []struct {
		name, v, like string
		dst           *int64
	}{
		{"--dram-capacity", f.DRAMCapacity, "2GiB", &o.DRAMCapacity},
		{"--ssd-capacity", f.SSDCapacity, "2GiB", &o.SSDCapacity},
		{"--bytes", f.Bytes, "2GiB", &o.Bytes},
		{"--flow-chunk", f.FlowChunk, "32MiB", &o.FlowChunkBytes},
		{"--memory-dram", f.MemoryDRAM, "2GiB", &o.MemoryDRAM},
	} {
		if s.v == "" {
			continue
		}
		n, err := bench.ParseSize(s.v)
		if err != nil || n <= 0 {
			bad("%s: %q is not a size like %s", s.name, s.v, s.like)
			continue
		}
		*s.dst = n
	}
	if o.RedisIOThreads < 0 || o.FlowClients < 0 {
		bad("--redis-io-threads and --flow-clients must not be negative")
	}
	if o.Clients < 0 || o.Clients > 10000 {
		bad("--clients: must be in [1, 10000]")
	}
	if o.Pipeline < 0 || o.Repeat < 0 {
		bad("--pipeline and --repeat must not be negative")
	}
	if o.MemoryKeys < 0 {
		bad("--memory-keys must not be negative")
	}
	return o, errors.Join(errs...)
}

// Validate reports every problem of f at once, as Parse does.
func (f *Flags) Validate() error {
	_, err := f.Parse()
	return err
}
