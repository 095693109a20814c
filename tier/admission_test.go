package tier_test

import (
	"strings"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/policy"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// Ten chains of four 100 KB blocks through 1 MiB of DRAM over a real SSD
// tier: under chain admission the evicted chains' tails are not written to
// SSD (and leave the store), their other blocks are; under all every block
// is written. Learned, with no history yet, does as chain does.
func TestChainAdmission(t *testing.T) {
	f := func(admission string, wantTails bool) {
		t.Helper()
		h := newHierarchy(t, hcfg{dram: 1 << 20, ssd: 16 << 20, opts: tier.HierarchyOptions{Admission: admission}})
		key := func(chain, i int) block.Key { return tiertest.Key(chain*4 + i) }
		for c := range 10 {
			for i := range 4 {
				opts := tier.PutOptions{}
				if i > 0 {
					opts.Parent, opts.HasParent = key(c, i-1), true
				}
				k := key(c, i)
				if _, err := h.Put(t.Context(), k, tiertest.Value(k, 100_000), opts); err != nil {
					t.Fatalf("Put chain %d block %d: %v", c, i, err)
				}
			}
		}
		// The first five chains left DRAM long ago; wait for their
		// demotions to land.
		inSSD := func(k block.Key) bool { e, ok := h.Lookup(k); return ok && e.Tiers.Has(1) }
		eventually(t, admission+" demotions", func() bool {
			for c := range 5 {
				if !inSSD(key(c, 0)) || !inSSD(key(c, 2)) {
					return false
				}
				if _, ok := h.Lookup(key(c, 3)); ok && !inSSD(key(c, 3)) {
					return false // the tail's eviction is still on its way
				}
			}
			return true
		})
		for c := range 5 {
			_, held := h.Lookup(key(c, 3))
			if held != wantTails || inSSD(key(c, 3)) != wantTails {
				t.Errorf("%s: chain %d's tail held %v (in SSD %v), want %v", admission, c, held, inSSD(key(c, 3)), wantTails)
			}
		}
		if refused := h.AdmissionRefused(); (refused > 0) == wantTails {
			t.Errorf("%s: %d evictions refused", admission, refused)
		}
		// A read served from SSD feeds the policy (learned's estimate).
		get(t, h, key(0, 0), tiertest.Value(key(0, 0), 100_000))
	}
	f(policy.AdmitAll, true)
	f(policy.AdmitChain, false)
	f(policy.AdmitLearned, false) // no class history yet: as chain
	f(policy.AdmitReturns, false) // no class history yet: as chain
}

func TestAdmissionOption(t *testing.T) {
	o := tier.HierarchyOptions{Admission: "sometimes", AdmissionGhost: -1}
	o.EnsureDefaults()
	err := o.Validate()
	if err == nil {
		t.Fatal("unknown admission and negative ghost accepted")
	}
	for _, want := range []string{`Admission "sometimes"`, "AdmissionGhost -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
