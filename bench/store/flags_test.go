package store

import (
	"slices"
	"testing"
	"time"

	"github.com/yuebing/yuebing/bench/benchtest"
)

func TestFlagsParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Flags)
		want []string
	}{
		{"defaults", func(*Flags) {}, nil},
		{"ok", func(f *Flags) { f.Sizes, f.Goroutines, f.IndexEntries = "64KiB, 1MiB", "1, 4", "1M" }, nil},
		{"sizes", func(f *Flags) { f.Sizes = "64KiB,0,big" }, []string{`--sizes: "0" is not a block size`, `--sizes: "big" is not a block size`}},
		{"goroutines", func(f *Flags) { f.Goroutines = "0,257,x" }, []string{`--goroutines: "0"`, `--goroutines: "257" is not a count from 1 to 256`, `--goroutines: "x"`}},
		{"entries low", func(f *Flags) { f.IndexEntries = "511" }, []string{`--index-entries: "511" is not a count from 512 to 2G`}},
		{"entries high", func(f *Flags) { f.IndexEntries = "3G" }, []string{`--index-entries: "3G"`}},
		{"duration", func(f *Flags) { f.Duration = -time.Second }, []string{"--duration: must not be negative"}},
		{"all at once", func(f *Flags) { f.Sizes, f.Goroutines, f.IndexEntries, f.Duration = "x", "0", "y", -1 }, []string{
			"--sizes: ", "--goroutines: ", "--index-entries: ", "--duration: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Flags
			tc.edit(&f)
			o, err := f.Parse()
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if tc.name == "ok" && (!slices.Equal(o.Sizes, []int64{64 << 10, 1 << 20}) || !slices.Equal(o.Goroutines, []int{1, 4}) || o.IndexEntries != 1_000_000) {
					t.Fatalf("options %+v", o)
				}
				return
			}
			benchtest.WantErrors(t, err, tc.want...)
		})
	}
}
