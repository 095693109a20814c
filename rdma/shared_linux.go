package rdma

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// SharedMemory is memory backed by a memfd, so a peer on the same host can
// map the very same pages (the shm transport passes the descriptor over a
// unix socket). The file is sealed against shrinking and growing before
// anyone sees it: a peer that holds the descriptor cannot truncate it under
// our mapping, which would turn our next access into SIGBUS.
//
// Close it only after the segment that uses it is unregistered.
type SharedMemory struct {
	f   *os.File
	mem []byte
}

// NewSharedMemory creates size bytes of zeroed shared memory; name shows up
// in /proc/PID/fd and helps debugging.
func NewSharedMemory(name string, size int) (*SharedMemory, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: shared memory size %d", ErrInvalidRequest, size)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("rdma: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name)
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("rdma: sizing shared memory: %w", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("rdma: sealing shared memory: %w", err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("rdma: mapping shared memory: %w", err)
	}
	return &SharedMemory{f: f, mem: mem}, nil
}

// Bytes returns the mapped memory; it is valid until Close.
func (m *SharedMemory) Bytes() []byte { return m.mem }

// File returns the memfd. The caller must not close it.
func (m *SharedMemory) File() *os.File { return m.f }

// Close unmaps the memory and closes the memfd. Peers that mapped it keep
// their mapping; the pages live until the last mapping goes.
func (m *SharedMemory) Close() error {
	err := unix.Munmap(m.mem)
	m.mem = nil
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	return err
}
