package resp

import (
	"strings"
	"testing"

	"github.com/yuebing/yuebing/bench/benchtest"
)

func TestFlagsParse(t *testing.T) {
	ok := Flags{Options: Options{Clients: 8, Repeat: 3}, Sizes: "4096,1MiB", DRAMCapacity: "2GiB", SSDCapacity: "4GiB",
		Bytes: "64MiB", FlowChunk: "256KiB", MemoryDRAM: "1GiB"}
	for _, tc := range []struct {
		name string
		edit func(*Flags)
		want []string
	}{
		{"ok", func(*Flags) {}, nil},
		{"defaults", func(f *Flags) { *f = Flags{} }, nil},
		{"sizes", func(f *Flags) { f.Sizes = "4096,big,0" }, []string{
			`--sizes: "big" is not a size like 4096 or 1MiB`, `--sizes: "0" is not a size like 4096 or 1MiB`}},
		{"capacities", func(f *Flags) { f.DRAMCapacity, f.SSDCapacity, f.Bytes = "lots", "-1", "x" }, []string{
			`--dram-capacity: "lots" is not a size like 2GiB`, `--ssd-capacity: "-1" is not a size like 2GiB`, `--bytes: "x" is not a size like 2GiB`}},
		{"flow chunk", func(f *Flags) { f.FlowChunk = "0" }, []string{`--flow-chunk: "0" is not a size like 32MiB`}},
		{"memory", func(f *Flags) { f.MemoryDRAM, f.MemoryKeys = "none", -1 }, []string{
			`--memory-dram: "none" is not a size like 2GiB`, "--memory-keys must not be negative"}},
		{"counts", func(f *Flags) { f.RedisIOThreads, f.Clients, f.Pipeline = -1, 10001, -2 }, []string{
			"--redis-io-threads and --flow-clients must not be negative", "--clients: must be in [1, 10000]",
			"--pipeline and --repeat must not be negative"}},
		{"every problem at once", func(f *Flags) { f.Sizes, f.FlowClients, f.Repeat, f.Clients = "?", -1, -1, -1 }, []string{
			`--sizes: "?"`, "--flow-clients must not be negative", "--repeat must not be negative", "--clients: must be in"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ok
			tc.edit(&f)
			o, err := f.Parse()
			if verr := f.Validate(); (verr == nil) != (err == nil) {
				t.Errorf("Validate %v, Parse %v", verr, err)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if tc.name == "ok" && (len(o.Sizes) != 2 || o.Sizes[1] != 1<<20 || o.DRAMCapacity != 2<<30 || o.SSDCapacity != 4<<30 ||
					o.Bytes != 64<<20 || o.FlowChunkBytes != 256<<10 || o.MemoryDRAM != 1<<30) {
					t.Fatalf("options %+v", o)
				}
				return
			}
			benchtest.WantErrors(t, err, tc.want...)
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tc.want) && tc.name != "every problem at once" {
				t.Errorf("%d problems reported, want %d: %v", n, len(tc.want), err)
			}
		})
	}
}
