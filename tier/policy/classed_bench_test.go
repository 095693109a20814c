package policy

import "testing"

var sinkKey int

// BenchmarkEvictCycle is one add and one eviction in a full cache of 4096
// blocks, the work a put under pressure gives the policy: the plain
// policy beside Classed over it with every block in one class (no client
// asked for classes) and with blocks spread over three classes.
func BenchmarkEvictCycle(b *testing.B) {
	const n = 4096
	for _, name := range []string{"lru", "s3fifo"} {
		for _, mode := range []string{"plain", "classed-one", "classed-three"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				var p Policy[int]
				var err error
				if mode == "plain" {
					p, err = New[int](name, n)
				} else {
					p, err = NewClassed[int](name, n, 3)
				}
				if err != nil {
					b.Fatal(err)
				}
				class := func(i int) int {
					if mode == "classed-three" {
						return i % 3
					}
					return 1
				}
				for i := range n {
					p.Add(i, Info[int]{Size: 1, Class: class(i)})
				}
				b.ReportAllocs()
				i := n
				for b.Loop() {
					k, ok := p.Evict(nil)
					if !ok {
						b.Fatal("nothing to evict")
					}
					sinkKey = k
					p.Add(i, Info[int]{Size: 1, Class: class(i)})
					i++
				}
			})
		}
	}
}
