package replication

import (
	"testing"

	"github.com/yuebing/yuebing/bench/benchtest"
)

func TestFlagsParse(t *testing.T) {
	ok := Flags{Options: Options{Nodes: 10, RankBy: RankByReplicas}, Capacity: "3M", Ranks: "1,10", Every: 4}
	for _, tc := range []struct {
		name string
		edit func(*Flags)
		want []string
	}{
		{"ok", func(*Flags) {}, nil},
		{"flags", func(f *Flags) { f.Capacity, f.Ranks, f.Every = "lots", "0", 0 }, []string{
			"--capacity: ", `--ranks: "0" is not a rank (1 is the most accessed key)`, "--every: 0, want at least 1"}},
		{"options", func(f *Flags) { f.Nodes = 2000 }, []string{"2000 nodes, want 1 to 1024"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ok
			tc.edit(&f)
			o, err := f.Parse()
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if o.NodeCapacity != 3_000_000 || len(o.Ranks) != 2 {
					t.Fatalf("options %+v", o)
				}
				return
			}
			benchtest.WantErrors(t, err, tc.want...)
		})
	}
}
