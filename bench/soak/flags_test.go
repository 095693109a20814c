package soak

import (
	"testing"
	"time"

	"github.com/yuebing/yuebing/bench/benchtest"
)

func TestFlagsParse(t *testing.T) {
	ok := Flags{
		Options:      Options{Binary: "yuebing", Duration: time.Minute, KillEvery: time.Minute, DurableEvery: time.Second},
		DRAMCapacity: "64MiB", SSDCapacity: "1GiB", MaxInflightBytes: "256MiB", MinValue: "4KiB", MaxValue: "1MiB",
	}
	for _, tc := range []struct {
		name string
		edit func(*Flags)
		want []string
	}{
		{"ok", func(*Flags) {}, nil},
		{"no kill, no durable", func(f *Flags) { f.NoKill, f.NoDurable, f.KillEvery, f.DurableEvery = true, true, 0, 0 }, nil},
		{"sizes", func(f *Flags) { f.SSDCapacity, f.MaxValue = "big", "x" }, []string{"--ssd-capacity: ", "--max-value: "}},
		{"every flag", func(f *Flags) { f.KillEvery, f.Engines, f.DurableEvery, f.Duration = 0, -1, 0, 0 }, []string{
			"--kill-every: 0s, want > 0 (or --no-kill)", "--engines: -1, want 0 (none) or more",
			"--durable-every: 0s, want > 0 (or --no-durable)", "--duration: 0s, want > 0"}},
		{"engine kill", func(f *Flags) { f.EngineKillEvery = -time.Second }, []string{"--engine-kill-every: -1s"}},
		{"options", func(f *Flags) { f.DRAMCapacity = "1MiB" }, []string{"soak: capacities DRAM"}},
		{"s3 flags with the rest", func(f *Flags) { f.S3.Capacity, f.MaxValue = "1GiB", "x" }, []string{"--s3-*: want --s3", "--max-value: "}},
		{"s3 options", func(f *Flags) { f.S3 = S3Flags{Local: true, Capacity: "1MiB"} }, []string{"s3: capacity 1048576"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ok
			tc.edit(&f)
			o, err := f.Parse()
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if o.DRAMCapacity != 64<<20 || o.MaxValue != 1<<20 || o.Engines != -1 {
					t.Fatalf("options %+v", o)
				}
				return
			}
			benchtest.WantErrors(t, err, tc.want...)
		})
	}
}

// TestFlagsS3Cluster: an S3 tier runs the cluster unless --cluster says
// otherwise; without one, one node unless --cluster.
func TestFlagsS3Cluster(t *testing.T) {
	f := func(s3 S3Flags, cluster, set, want bool) {
		t.Helper()
		fl := Flags{
			Options:      Options{Binary: "yuebing", Duration: time.Minute, KillEvery: time.Minute, DurableEvery: time.Second, Cluster: cluster},
			DRAMCapacity: "64MiB", SSDCapacity: "1GiB", MaxInflightBytes: "256MiB", MinValue: "4KiB", MaxValue: "1MiB",
			S3: s3, ClusterSet: set,
		}
		// Validate wants a versitygw for --s3; the cluster choice does not.
		fl.S3.Versitygw = "/bin/true"
		o, err := fl.Parse()
		if err != nil {
			t.Fatal(err)
		}
		if o.Cluster != want {
			t.Errorf("s3 %+v, --cluster=%v (given %v): cluster %v, want %v", s3, cluster, set, o.Cluster, want)
		}
	}
	local := S3Flags{Local: true}
	external := S3Flags{Endpoint: "127.0.0.1:9000", Bucket: "b"}
	f(local, false, false, true)
	f(external, false, false, true)
	f(local, false, true, false)
	f(external, true, true, true)
	f(S3Flags{}, false, false, false)
	f(S3Flags{}, true, true, true)
}
