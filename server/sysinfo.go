package server

import (
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Default capacities when none is configured.
const (
	maxDefaultDRAM = 4 << 30
	maxDefaultSSD  = 64 << 30
	// fallbackCapacity is used when the machine cannot be asked.
	fallbackCapacity = 1 << 30
)

// defaultDRAMCapacity is min(4 GiB, 25% of RAM): the rest is left to the
// inference engine sharing the host, the page cache and the Go heap.
func defaultDRAMCapacity() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return fallbackCapacity
	}
	total := int64(si.Totalram) * int64(si.Unit)
	return roundCapacity(min(maxDefaultDRAM, total/4))
}

// defaultSSDCapacity is min(64 GiB, 50% of the free disk where dir lives).
// What dir already holds counts as free, so the default does not shrink
// each time the node restarts with a fuller tier.
func defaultSSDCapacity(dir string) int64 {
	probe := dir
	for {
		if _, err := os.Stat(probe); err == nil {
			break
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			return fallbackCapacity
		}
		probe = parent
	}
	var st unix.Statfs_t
	if err := unix.Statfs(probe, &st); err != nil {
		return fallbackCapacity
	}
	free := int64(st.Bavail)*int64(st.Bsize) + dirBytes(dir)
	return max(roundCapacity(min(maxDefaultSSD, free/2)), minSSDCapacity)
}

// dirBytes sums the sizes of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// roundCapacity rounds a derived capacity down to whole GiB (whole MiB
// below 1 GiB), so the banner and `yuebing config` print round numbers.
func roundCapacity(n int64) int64 {
	if n >= 1<<30 {
		return n &^ (1<<30 - 1)
	}
	return n &^ (1<<20 - 1)
}
