// Package budget bounds the block bytes a node holds in the Go heap for
// requests in flight: PUT bodies on their way to the SSD tier, copies read
// back from it, values streamed in by the Redis front end, and blocks
// fetched from other nodes. The HTTP API, the RESP server and the cluster
// read path share one Budget, so the heap a node can be made to hold by its
// clients is bounded by one number (limits.max_inflight_bytes) however the
// load is spread over the front ends.
//
// Each front end takes a User, which counts its own waits and rejections:
//
//	b, _ := budget.New(budget.Options{Capacity: 1 << 30, Wait: time.Second, Name: "limits.max_inflight_bytes"})
//	u := b.User("resp")
//	release, err := u.Acquire(ctx, size) // waits at most Options.Wait
//	if err != nil {
//		// errors.Is(err, budget.ErrExhausted) or budget.ErrTooLarge
//	}
//	defer release()
package budget
