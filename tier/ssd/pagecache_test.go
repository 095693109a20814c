package ssd

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// residentPages counts the pages of the tier's segment files that are in
// the page cache, and their total.
func residentPages(t *testing.T, dir string) (resident, total int) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil || st.Size() == 0 {
			f.Close()
			continue
		}
		m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		unix.Munmap(m)
		for _, v := range vec {
			resident += int(v & 1)
		}
		total += len(vec)
	}
	return resident, total
}

// TestPagesAreDropped checks the default KeepPageCache=false: records
// written durably and read back leave (almost) nothing in the page cache,
// although they share pages with their neighbours.
func TestPagesAreDropped(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err == nil && fs.Type == unix.TMPFS_MAGIC {
		t.Skip("the temporary directory is on tmpfs, whose pages cannot be dropped")
	}
	const size, n = 64<<10 + 100, 200 // records straddle page boundaries
	s, err := Open(Options{Dir: dir, Capacity: 64 << 20, MaxBlockSize: size})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range n {
		if err := s.Put(t.Context(), tiertest.Key(i), tiertest.Value(tiertest.Key(i), size), tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Pages of the segment being appended to may still be in flight; a
	// tenth of all is far below the whole that stays when drops miss.
	if res, total := residentPages(t, dir); res > total/10 {
		t.Errorf("after durable puts %d of %d segment pages are cached, want few", res, total)
	}
	for i := range n {
		h, err := s.Get(t.Context(), tiertest.Key(i))
		if err != nil {
			t.Fatal(err)
		}
		h.Release()
	}
	if res, total := residentPages(t, dir); res > total/10 {
		t.Errorf("after reads %d of %d segment pages are cached, want few", res, total)
	}
}
