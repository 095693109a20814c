package cluster

import (
	"testing"

	"github.com/yuebing/yuebing/bench/benchtest"
)

func TestFlagsParse(t *testing.T) {
	ok := Flags{Options: Options{Nodes: 3, Samples: 20}, DRAMCapacity: "96MiB", BlockBytes: "16KiB", GetSize: "1MiB", Ranks: "10,100", Every: 4}
	for _, tc := range []struct {
		name string
		edit func(*Flags)
		want []string
	}{
		{"ok", func(*Flags) {}, nil},
		{"sizes", func(f *Flags) { f.DRAMCapacity, f.GetSize = "lots", "x" }, []string{"--dram-capacity: ", "--get-size: "}},
		{"ranks and every", func(f *Flags) { f.Ranks, f.Every = "10,0", 0 }, []string{`--ranks: "0" is not a rank`, "--every: 0, want at least 1"}},
		{"options", func(f *Flags) { f.Nodes = 1 }, []string{"bench: cluster: 1 nodes, want 2 to 16"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ok
			tc.edit(&f)
			o, err := f.Parse()
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if o.DRAMCapacity != 96<<20 || o.BlockBytes != 16<<10 || o.GetSize != 1<<20 || len(o.Ranks) != 2 {
					t.Fatalf("options %+v", o)
				}
				return
			}
			benchtest.WantErrors(t, err, tc.want...)
		})
	}
}
