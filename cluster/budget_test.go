package cluster

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/yuebing/yuebing/server/budget"
	"github.com/yuebing/yuebing/tier"
)

// TestFetchChargesBudget: a block fetched from another node holds its size
// in the shared budget until its handle is released, and a fetch that finds
// the budget full is refused instead of buffering past it.
func TestFetchChargesBudget(t *testing.T) {
	bud, err := budget.New(budget.Options{Capacity: 1 << 20, Wait: 50 * time.Millisecond, Name: "limits.max_inflight_bytes"})
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(t, 2, func(o *Options) {
		o.Admit = AdmitNever
		o.Budget = bud.User("cluster")
	})
	c.waitFormed()
	a, b := c.nodes[0], c.nodes[1]
	k := testKey(1)
	want := value(1, 300<<10)
	if _, err := a.store.Put(t.Context(), k, want, tier.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if got := holderNames(t, b.n, k); !slices.Equal(got, []string{"n0"}) {
			return fmt.Errorf("holders %v", got)
		}
		return nil
	})
	h, _, err := b.store.Fetch(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h.Bytes(), want) {
		t.Fatal("fetched bytes differ")
	}
	if got := bud.InUse(); got != int64(len(want)) {
		t.Fatalf("budget in use while the fetched block is held: %d, want %d", got, len(want))
	}
	h.Release()
	if got := bud.InUse(); got != 0 {
		t.Fatalf("budget in use after release: %d", got)
	}

	hold, ok := bud.User("http").TryAcquire(1 << 20)
	if !ok {
		t.Fatal("could not fill the budget")
	}
	if h, _, err := b.store.Fetch(t.Context(), k); err == nil {
		h.Release()
		t.Fatal("a fetch with the budget full succeeded")
	}
	if st := bud.User("cluster").Stats(); st.Rejections == 0 || st.InUse != 0 {
		t.Fatalf("cluster budget stats %+v, want rejections and nothing held", st)
	}
	hold()
	h, _, err = b.store.Fetch(t.Context(), k)
	if err != nil {
		t.Fatalf("fetch once the budget is free: %v", err)
	}
	h.Release()
}
