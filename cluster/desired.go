package cluster

import (
	"sync"

	"github.com/yuebing/yuebing/block"
)

// desiredTable holds the replica counts this node knows for blocks it
// holds: set by a put with a replica count, by the leader when it copies a
// block here, or when a count is changed. The node reports them with its
// blocks, so a new leader learns every count from the nodes, as it learns
// locations. Bounded: past max entries, new counts are not remembered (the
// leader keeps what it was told until it changes).
type desiredTable struct {
	mu  sync.Mutex
	m   map[block.Key]uint8
	max int
}

func (t *desiredTable) init(max int) {
	t.m = make(map[block.Key]uint8)
	t.max = max
}

// set records count for k; 0 forgets it.
func (t *desiredTable) set(k block.Key, count uint8) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if count == 0 {
		delete(t.m, k)
		return
	}
	if _, ok := t.m[k]; ok || len(t.m) < t.max {
		t.m[k] = count
	}
}

func (t *desiredTable) get(k block.Key) uint8 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[k]
}

func (t *desiredTable) forget(k block.Key) { t.set(k, 0) }
