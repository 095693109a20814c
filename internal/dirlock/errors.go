package dirlock

import (
	"errors"
	"fmt"
	"time"
)

// ErrLocked: another process holds the directory's lock.
var ErrLocked = errors.New("dirlock: directory in use by another process")

// HeldError is the error of an Acquire that gave up: it names the process
// holding the lock, as recorded in the lock file. It wraps ErrLocked.
type HeldError struct {
	// Dir is the directory asked for.
	Dir string
	// PID and Cmdline identify the holder; PID is 0 when the lock file
	// names none (a holder that has just taken it and not yet written
	// itself down).
	PID     int
	Cmdline string
	// Waited is how long Acquire waited for the holder to go: its
	// Options.Wait.
	Waited time.Duration
}

func (e *HeldError) Error() string {
	who := "another process (it has not recorded its pid)"
	if e.PID != 0 {
		who = fmt.Sprintf("pid %d (%s)", e.PID, e.Cmdline)
	}
	return fmt.Sprintf("dirlock: %s is in use by %s; waited %v for it", e.Dir, who, e.Waited)
}

func (e *HeldError) Unwrap() error { return ErrLocked }
