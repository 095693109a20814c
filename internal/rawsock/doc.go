// Package rawsock reads a TCP socket with raw non-blocking read calls
// through the runtime's poller, for connections that stream long values
// straight into their destination.
//
// Through net.Conn the runtime treats every read as a call that may block:
// one that copies megabytes outlasts the scheduler's 20 µs check, and the
// runtime hands the goroutine's processor to another thread and takes it
// back, a few futex wake-ups and context switches per call. The socket is
// non-blocking, so a raw read never waits; it copies what is queued. While a
// long read is under way SO_RCVLOWAT is raised to what it still wants (at
// most LowatMax), so the poller wakes the reader once that much is queued
// rather than at every segment. server/resp measured both on 1-4 MiB values
// (docs/benchmarks.md).
package rawsock
