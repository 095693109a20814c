// Package dirlock keeps two processes from using one data directory at once.
//
// The lock is an flock(2) on a file in the directory (FileName). The kernel
// drops it when its holder exits, however it exits (kill -9 included), so
// there is never a stale lock to clean up; while it is held, the file
// records the holder's pid and command line, so a process refused the
// directory can say who has it.
//
// A process killed with SIGKILL keeps its files, and so its locks (the
// lock here, pebble's LOCK beside it), until the kernel has finished
// tearing it down, which for a process with gigabytes mapped can take a
// moment: Acquire therefore waits a bounded time for the holder to go
// before it gives up.
//
//	l, err := dirlock.Acquire(ctx, dir, dirlock.Options{Wait: 10 * time.Second})
//	var held *dirlock.HeldError
//	if errors.As(err, &held) {
//		// held.PID and held.Cmdline name the process that has dir
//	}
//	defer l.Release()
package dirlock
