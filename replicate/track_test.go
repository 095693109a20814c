package replicate

import (
	"testing"

	"github.com/yuebing/yuebing/index"
)

// TestTrackUnseenHolder: the index may list a holder the core has had no
// event of yet (the leader applies a node's first report after indexing
// it); tracking its block then must not fail, and the holder counts once
// it is up.
func TestTrackUnseenHolder(t *testing.T) {
	g := index.NewGlobal(index.GlobalOptions{})
	c, err := NewCore(Options{}, g)
	if err != nil {
		t.Fatal(err)
	}
	k := keyOfInt(1)
	if err := g.Apply(7, []index.Change{{Key: k, Added: true}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Step(epoch, NodeUp{Node: 0, Capacity: 1 << 30, Free: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	if err := c.Step(epoch, SetReplicas{Key: k, Count: 2}); err != nil {
		t.Fatal(err)
	}
	c.Tick(epoch)
	if err := c.Step(epoch, NodeUp{Node: 7, Capacity: 1 << 30, Free: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	b, ok := c.Block(epoch, k)
	if !ok || b.Replicas != 1 || b.Desired != 2 {
		t.Fatalf("block %+v, %v", b, ok)
	}
}
