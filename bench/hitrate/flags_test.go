package hitrate

import (
	"testing"

	"github.com/yuebing/yuebing/bench/benchtest"
)

func TestFlagsOptions(t *testing.T) {
	ok := Flags{Capacities: "1M,inf", Policies: "lru", Admissions: "all"}
	for _, tc := range []struct {
		name string
		edit func(*Flags)
		want []string
	}{
		{"ok", func(*Flags) {}, nil},
		{"tiers", func(f *Flags) { f.SSDCapacity, f.S3Capacity = "8M", "64M" }, nil},
		{"capacity", func(f *Flags) { f.Capacities = "x,1" }, []string{"--capacity: ", "--capacity: 1 tokens is less than one"}},
		{"s3 alone", func(f *Flags) { f.S3Capacity = "64M" }, []string{"--s3-capacity needs --ssd-capacity"}},
		{"ssd", func(f *Flags) { f.SSDCapacity, f.S3Capacity, f.Admissions = "1", "y", "all,never" }, []string{
			"--ssd-capacity: 1 tokens is less than one", `--s3-capacity: "y"`, `--ssd-admission: "never"`}},
		{"policy and workers", func(f *Flags) { f.Policies, f.Workers = "nope", -1 }, []string{"--policy: ", "--workers: -1 is negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ok
			tc.edit(&f)
			o, err := f.Options()
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if len(o.Capacities) != 1 || o.Capacities[0] != 1_000_000 {
					t.Fatalf("options %+v", o)
				}
				return
			}
			benchtest.WantErrors(t, err, tc.want...)
		})
	}
}
