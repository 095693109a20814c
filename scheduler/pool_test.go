package scheduler

import (
	"errors"
	"testing"
	"time"
)

// TestPoolHits checks that a store instance's prefix, given per request,
// is pulled over the bandwidth of the tier it sits in.
func TestPoolHits(t *testing.T) {
	opts := scriptOptions(t)
	// 100k tokens/s from DRAM, 20k/s from SSD: pulling 20 blocks of 256
	// tokens takes 51.2 ms or 256 ms, both less than their 512 ms prefill.
	opts.SourceBandwidth[SourceSSD] = 20_000
	c, err := NewCore(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []Instance{{ID: "p0", Role: RolePrefill}, {ID: "pool", Role: RoleStore}} {
		if err := c.AddInstance(in, 0); err != nil {
			t.Fatal(err)
		}
	}
	keys := testChain("a", 20)
	f := func(hit PoolHit, wantTransfer time.Duration, wantSource Source) {
		t.Helper()
		d, err := c.Schedule(Request{Keys: keys, Pool: []PoolHit{hit}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Finished(d.RequestID, 0); err != nil {
			t.Fatal(err)
		}
		if d.Pull == nil || d.PrefixTokens != hit.Blocks*256 || d.PullSource != wantSource {
			t.Fatalf("%+v: decision %+v, want a pull of %d blocks from %s", hit, d, hit.Blocks, wantSource)
		}
		if got := d.Estimates.Transfer; got < wantTransfer-time.Millisecond || got > wantTransfer+time.Millisecond {
			t.Fatalf("%+v: transfer %v, want %v", hit, got, wantTransfer)
		}
	}
	f(PoolHit{Instance: "pool", Blocks: 20, Source: SourceDRAM}, 51200*time.Microsecond, SourceDRAM)
	f(PoolHit{Instance: "pool", Blocks: 20, Source: SourceSSD}, 256*time.Millisecond, SourceSSD)
	f(PoolHit{Instance: "pool", Blocks: 10, Source: SourceDRAM}, 25600*time.Microsecond, SourceDRAM)

	// A pull slower than the prefill it saves is not made: at 4k tokens/s
	// the SSD's 20 blocks take 1.28 s against 512 ms of compute.
	opts.SourceBandwidth[SourceSSD] = 4_000
	slow, err := NewCore(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []Instance{{ID: "p0", Role: RolePrefill}, {ID: "pool", Role: RoleStore}} {
		if err := slow.AddInstance(in, 0); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := slow.Schedule(Request{Keys: keys, Pool: []PoolHit{{Instance: "pool", Blocks: 20, Source: SourceSSD}}}, 0); err != nil || d.Pull != nil || d.PrefixTokens != 0 {
		t.Fatalf("slow SSD pull: decision %+v, %v; want the prompt computed", d, err)
	}

	for _, bad := range []PoolHit{{Instance: "p0", Blocks: 1}, {Instance: "nope", Blocks: 1}, {Instance: "pool", Blocks: 21}, {Instance: "pool", Blocks: 1, Source: NumSources}} {
		if _, err := c.Schedule(Request{Keys: keys, Pool: []PoolHit{bad}}, 0); !errors.Is(err, ErrRequest) {
			t.Fatalf("%+v: got %v, want ErrRequest", bad, err)
		}
	}
}
