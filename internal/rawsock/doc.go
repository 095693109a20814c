// Package rawsock reads and writes a TCP socket with raw non-blocking
// system calls through the runtime's poller, for connections that stream
// long values and for the request loops whose every call counts.
//
// Through net.Conn the runtime treats every read and write as a call that
// may block (syscall.Syscall, runtime.entersyscall). One that copies
// megabytes outlasts the scheduler's 20 µs check, and the runtime hands the
// goroutine's processor to another thread and takes it back, a few futex
// wake-ups and context switches per call; and on a server whose processors
// were all idle between requests, entersyscall wakes sysmon, which then
// polls every 20 µs for a millisecond or more. The socket is non-blocking,
// so a raw read or writev never waits: it copies what is queued or what
// there is room for, and on EAGAIN the goroutine parks in the poller as
// net.Conn's would, so deadlines and Close work as before.
//
// While a long read is under way SO_RCVLOWAT is raised to what it still
// wants (at most LowatMax), so the poller wakes the reader once that much
// is queued rather than at every segment. server/resp and the HTTP put
// connection of server measured both on 1-4 MiB values
// (docs/benchmarks.md).
package rawsock
