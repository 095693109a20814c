package policy

// ghosts remembers recently evicted keys and their sizes, oldest at the
// back, within a size budget. S3-FIFO and ARC use it to recognize a block
// that comes back soon after it was evicted.
type ghosts[K comparable] struct {
	list  list[K]
	nodes map[K]*node[K]
	size  int64
	// onTrim, if set, sees each node trim forgets.
	onTrim func(*node[K])
}

func newGhosts[K comparable]() ghosts[K] { return ghosts[K]{nodes: make(map[K]*node[K])} }

// add records an evicted key, reusing its node; the node's freq and flags
// stay for the policy to read back.
func (g *ghosts[K]) add(n *node[K]) {
	g.nodes[n.key] = n
	g.list.pushFront(n)
	g.size += n.size
}

// take forgets k and reports whether it was remembered, and its node.
func (g *ghosts[K]) take(k K) (*node[K], bool) {
	n, ok := g.nodes[k]
	if ok {
		g.list.remove(n)
		delete(g.nodes, k)
		g.size -= n.size
	}
	return n, ok
}

// trim forgets the oldest keys until the ghosts fit in budget.
func (g *ghosts[K]) trim(budget int64) {
	for g.size > budget {
		n, _ := g.take(g.list.back().key)
		if g.onTrim != nil {
			g.onTrim(n)
		}
	}
}
