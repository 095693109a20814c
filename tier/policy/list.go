package policy

// node is an element of an intrusive doubly linked list. Policies embed
// their own per-key state beside the links.
type node[K comparable] struct {
	key        K
	prev, next *node[K]
	// freq and flags are spare per-key state for policies that need it
	// (CLOCK-style visited bits, frequency counters, queue membership).
	freq  int32
	flags uint8
	// size is the block's size in the owner's unit, for policies that
	// budget queues by size.
	size int64
}

// list is a doubly linked list with a sentinel-free head and tail; front is
// the most recent end.
type list[K comparable] struct {
	head, tail *node[K]
	n          int
}

func (l *list[K]) pushFront(n *node[K]) {
	n.prev, n.next = nil, l.head
	if l.head != nil {
		l.head.prev = n
	} else {
		l.tail = n
	}
	l.head = n
	l.n++
}

func (l *list[K]) remove(n *node[K]) {
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		l.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		l.tail = n.prev
	}
	n.prev, n.next = nil, nil
	l.n--
}

func (l *list[K]) moveToFront(n *node[K]) {
	if l.head == n {
		return
	}
	l.remove(n)
	l.pushFront(n)
}

func (l *list[K]) back() *node[K] { return l.tail }
func (l *list[K]) len() int       { return l.n }

// canEvict reports whether k may be evicted; a nil func allows everything.
func canEvict[K comparable](ok func(K) bool, k K) bool { return ok == nil || ok(k) }

// backmost returns the evictable node nearest the back (least recent end),
// or nil. Non-evictable nodes keep their place: pins are short-lived.
func (l *list[K]) backmost(ok func(K) bool) *node[K] {
	for n := l.back(); n != nil; n = n.prev {
		if canEvict(ok, n.key) {
			return n
		}
	}
	return nil
}

// insertAfter puts n right behind at (toward the back).
func (l *list[K]) insertAfter(at, n *node[K]) {
	n.prev, n.next = at, at.next
	if at.next != nil {
		at.next.prev = n
	} else {
		l.tail = n
	}
	at.next = n
	l.n++
}
