package ssd

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// FS is the file layer under the segment files: the few calls the tier
// makes on them. The default is the operating system; tests put a faulty
// disk here (tier/ssd/ssdtest) to check what the tier does when the device
// fails. The pebble index has a seam of its own, Options.IndexFS.
type FS interface {
	// OpenFile opens a segment file as os.OpenFile does.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove deletes a file.
	Remove(name string) error
	// ReadDir lists a directory.
	ReadDir(name string) ([]os.DirEntry, error)
	// MkdirAll creates a directory and its parents.
	MkdirAll(name string, perm os.FileMode) error
	// SyncDir makes a directory's entries (a new file's name) durable.
	SyncDir(name string) error
}

// File is an open segment file. Its methods are called concurrently, as
// positioned I/O allows.
type File interface {
	// ReadAt reads len(p) bytes at off, as io.ReaderAt.
	ReadAt(p []byte, off int64) (int, error)
	// WriteAt writes bufs one after another at off (pwritev); it may write
	// less than all of them, reporting how much it wrote.
	WriteAt(bufs [][]byte, off int64) (int, error)
	// Datasync flushes the file's data to the device (fdatasync).
	Datasync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Size returns the file's size.
	Size() (int64, error)
	// Close closes the file.
	Close() error
}

// fder is implemented by files with a descriptor, for page-cache advice.
// Files without one get none, which changes nothing the tier relies on.
type fder interface{ Fd() uintptr }

// OSFS is the operating system's file layer, the default FS.
type OSFS struct{}

var _ FS = OSFS{}

// OpenFile implements FS.
func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// ReadDir implements FS.
func (OSFS) ReadDir(name string) ([]os.DirEntry, error) { return os.ReadDir(name) }

// MkdirAll implements FS.
func (OSFS) MkdirAll(name string, perm os.FileMode) error { return os.MkdirAll(name, perm) }

// SyncDir implements FS.
func (OSFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Free implements freeSpacer: the bytes an unprivileged writer may still
// use on the file system holding dir.
func (OSFS) Free(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// freeSpacer is implemented by file layers that can tell the free space
// under a directory; the probe of a degraded tier uses it.
type freeSpacer interface {
	Free(dir string) (int64, error)
}

type osFile struct{ *os.File }

func (f osFile) WriteAt(bufs [][]byte, off int64) (int, error) {
	return unix.Pwritev(int(f.Fd()), bufs, off)
}

func (f osFile) Datasync() error { return unix.Fdatasync(int(f.Fd())) }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// fadvise passes page-cache advice for a file that has a descriptor.
func fadvise(f File, off, n int64, advice int) {
	if d, ok := f.(fder); ok {
		_ = unix.Fadvise(int(d.Fd()), off, n, advice)
	}
}

// writeFull writes bufs at off, continuing after short writes.
func writeFull(f File, bufs [][]byte, off int64) error {
	for len(bufs) > 0 {
		n, err := f.WriteAt(bufs, off)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("ssd: write of %d buffers at %d made no progress", len(bufs), off)
		}
		off += int64(n)
		for n > 0 && len(bufs) > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
			} else {
				bufs[0] = bufs[0][n:]
				n = 0
			}
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return nil
}
