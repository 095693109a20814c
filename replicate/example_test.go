package replicate_test

import (
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/replicate"
)

func Example() {
	now := time.Unix(1_700_000_000, 0)
	k := block.Key(sha256.Sum256([]byte("system prompt, block 0")))

	// The leader's index: node 1 holds the block.
	g := index.NewGlobal(index.GlobalOptions{})
	_ = g.Apply(1, []index.Change{{Key: k, Tier: 0, Added: true}})

	c, err := replicate.NewCore(replicate.Options{HotHits: 32}, g)
	if err != nil {
		panic(err)
	}
	for n := uint32(1); n <= 3; n++ {
		_ = c.Step(now, replicate.NodeUp{Node: n, Capacity: 1 << 30, Free: 1 << 30})
	}
	// Node 3 fetches the block 40 times in a second: it is hot.
	_ = c.Step(now, replicate.Hits{Node: 3, Keys: []block.Key{k}, Counts: []uint32{40}})

	for _, a := range c.Tick(now) {
		fmt.Println(a.Kind, a.From, "->", a.Node, a.Reason)
		// ... the executor copies the block, then:
		_ = c.Step(now, replicate.Done{ID: a.ID})
	}
	s, _ := c.Block(now, k)
	fmt.Println("replicas:", s.Replicas, "heat:", s.Heat)
	// Output:
	// copy 1 -> 3 hot
	// replicas: 2 heat: 40
}
