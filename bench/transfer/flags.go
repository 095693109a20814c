package transfer

import (
	"errors"
	"fmt"
)

// ValidateFlags is Validate for `yuebing bench transfer`: it reports every
// problem at once, each naming the flag that sets the option.
func (o *Options) ValidateFlags() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Transport != "tcp" && o.Transport != "shm" {
		bad("--transport: %q is not tcp or shm", o.Transport)
	}
	if o.Op != "read" && o.Op != "write" {
		bad("--op: %q is not read or write", o.Op)
	}
	if o.Threads <= 0 || o.Threads > 1024 {
		bad("--threads: %d is not in [1, 1024]", o.Threads)
	}
	if o.Batch <= 0 || o.Batch > 4096 {
		bad("--batch: %d is not in [1, 4096]", o.Batch)
	}
	if o.BlockSize <= 0 {
		bad("--block-size: %d must be positive", o.BlockSize)
	}
	if o.Paths <= 0 || o.Paths > 16 {
		bad("--paths: %d is not in [1, 16]", o.Paths)
	}
	if o.SliceSize <= 0 || o.SliceSize > 1<<30 {
		bad("--slice-size: %d is not in [1, 1073741824]", o.SliceSize)
	}
	if o.Duration <= 0 {
		bad("--duration: %v must be positive", o.Duration)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Only the memory bound is left for Validate to find.
	if err := o.Validate(); err != nil {
		return fmt.Errorf("--threads/--batch/--block-size: %v", err)
	}
	return nil
}
