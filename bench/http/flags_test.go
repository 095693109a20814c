package http

import (
	"testing"
	"time"

	"github.com/yuebing/yuebing/bench/benchtest"
)

func TestFlagsParse(t *testing.T) {
	ok := Flags{Options: Options{Concurrency: 8}, ValueSize: "4MiB", Mix: "1:0", DRAMCapacity: "2GiB"}
	for _, tc := range []struct {
		name string
		edit func(*Flags)
		want []string
	}{
		{"ok", func(*Flags) {}, nil},
		{"value size", func(f *Flags) { f.ValueSize = "0" }, []string{`--value-size: "0" is not a size from 1B to 1GiB`}},
		{"value size large", func(f *Flags) { f.ValueSize = "2GiB" }, []string{`--value-size: "2GiB"`}},
		{"mix", func(f *Flags) { f.Mix = "90" }, []string{`--mix: "90" is not GET:PUT weights like 1:0, 90:10 or 0:1`}},
		{"mix zero", func(f *Flags) { f.Mix = "0:0" }, []string{`--mix: "0:0"`}},
		{"mix negative", func(f *Flags) { f.Mix = "-1:2" }, []string{`--mix: "-1:2"`}},
		{"concurrency", func(f *Flags) { f.Concurrency = 1025 }, []string{"--concurrency: 1025, want 1 to 1024"}},
		{"duration", func(f *Flags) { f.Duration = -time.Second }, []string{"--duration: -1s, want a positive duration like 10s"}},
		{"dram", func(f *Flags) { f.DRAMCapacity = "lots" }, []string{"--dram-capacity: "}},
		{"dram with addr", func(f *Flags) { f.DRAMCapacity, f.Addr = "lots", "127.0.0.1:1" }, nil},
		{"all at once", func(f *Flags) { f.ValueSize, f.Mix, f.Concurrency, f.DRAMCapacity = "x", "y", 0, "z" }, []string{
			"--value-size: ", "--mix: ", "--concurrency: ", "--dram-capacity: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ok
			tc.edit(&f)
			o, err := f.Parse()
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if o.ValueSize != 4<<20 || o.GetWeight != 1 || o.PutWeight != 0 || (o.Addr == "" && o.Node.DRAMCapacity != 2<<30) {
					t.Fatalf("options %+v", o)
				}
				return
			}
			benchtest.WantErrors(t, err, tc.want...)
		})
	}
}
