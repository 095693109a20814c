package ssdtest

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/yuebing/yuebing/tier/ssd"
)

// Op is a kind of operation a Fault applies to.
type Op int

const (
	OpRead     Op = iota + 1 // ReadAt (pebble: any read)
	OpWrite                  // WriteAt (pebble: any write)
	OpSync                   // Datasync (pebble: Sync, SyncData, SyncTo)
	OpCreate                 // OpenFile with O_CREATE (pebble: Create)
	OpTruncate               // Truncate
	OpSyncDir                // SyncDir
)

func (o Op) String() string {
	switch o {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	case OpCreate:
		return "create"
	case OpTruncate:
		return "truncate"
	case OpSyncDir:
		return "syncdir"
	}
	return "op?"
}

// Fault is one way the disk fails.
type Fault struct {
	Op Op
	// Err is the error the operation returns. Default syscall.EIO.
	Err error
	// Index applies the fault to the pebble index instead of the segment
	// files.
	Index bool
	// Match, when set, is a filepath.Match pattern for the file's base
	// name ("*.seg"); otherwise every file matches.
	Match string
	// Skip lets this many matching operations succeed first.
	Skip int
	// Count is how many times the fault fires before it clears itself;
	// 0 fires until Clear.
	Count int
	// Torn, on a write, writes a random prefix of the bytes (possibly
	// none) before failing, as a write cut short by a full disk or by a
	// crash does.
	Torn bool
	// Crash, once the fault fires, kills the disk: every later operation
	// on it fails with EIO until Reset, as if the process had died there.
	// The tier is then closed (its errors ignored) and reopened over a
	// fresh Disk, which is how a test reads what a crash left.
	Crash bool
	// Flip, on a read, returns the bytes with one of them changed instead
	// of an error: a device that returns wrong data (bit rot, a misdirected
	// write).
	Flip bool
}

// Disk is a simulator of a failing device. It is safe for concurrent use.
type Disk struct {
	mu      sync.Mutex
	faults  []*active
	crashed bool
	rng     *rand.Rand
	fired   map[Op]int
	// firedOn counts fired faults by operation and file base name.
	firedOn map[Op]map[string]int
}

type active struct {
	Fault
	seen, fired int
}

// NewDisk returns a healthy disk; seed drives the torn writes' lengths.
func NewDisk(seed uint64) *Disk {
	return &Disk{rng: rand.New(rand.NewPCG(seed, 0x55d)), fired: map[Op]int{}, firedOn: map[Op]map[string]int{}}
}

// Inject adds a fault.
func (d *Disk) Inject(f Fault) {
	if f.Err == nil {
		f.Err = syscall.EIO
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = append(d.faults, &active{Fault: f})
}

// Clear removes every fault; a crashed disk stays crashed (see Reset).
func (d *Disk) Clear() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = nil
}

// Reset clears the faults and the crash.
func (d *Disk) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults, d.crashed = nil, false
}

// Crashed reports whether a Crash fault has fired.
func (d *Disk) Crashed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.crashed
}

// Fired returns how many times faults of op have fired.
func (d *Disk) Fired(op Op) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fired[op]
}

// FiredMatching is Fired for the files whose base name matches glob
// (filepath.Match): the segments' "*.seg" apart from the tier's own device
// probe, say.
func (d *Disk) FiredMatching(op Op, glob string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for name, c := range d.firedOn[op] {
		if ok, _ := filepath.Match(glob, name); ok {
			n += c
		}
	}
	return n
}

// check decides an operation's fate: the fault that fires, if any.
func (d *Disk) check(op Op, index bool, path string) *active {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.crashed {
		return &active{Fault: Fault{Op: op, Err: syscall.EIO}}
	}
	for i, f := range d.faults {
		if f.Op != op || f.Index != index {
			continue
		}
		if f.Match != "" {
			if ok, _ := filepath.Match(f.Match, filepath.Base(path)); !ok {
				continue
			}
		}
		if f.seen++; f.seen <= f.Skip {
			continue
		}
		f.fired++
		d.fired[op]++
		if d.firedOn[op] == nil {
			d.firedOn[op] = map[string]int{}
		}
		d.firedOn[op][filepath.Base(path)]++
		if f.Count > 0 && f.fired >= f.Count {
			d.faults = append(d.faults[:i:i], d.faults[i+1:]...)
		}
		if f.Crash {
			d.crashed = true
		}
		return f
	}
	return nil
}

func (d *Disk) intn(n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rng.IntN(n)
}

// Files returns the disk as the segment files' file layer.
func (d *Disk) Files() ssd.FS { return files{d} }

// Index returns the disk as the pebble index's file system.
func (d *Disk) Index() vfs.FS {
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		var o Op
		switch op.Kind {
		case errorfs.OpFileRead, errorfs.OpFileReadAt:
			o = OpRead
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
			o = OpWrite
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo, errorfs.OpFileFlush:
			o = OpSync
		case errorfs.OpCreate:
			o = OpCreate
		default:
			if d.Crashed() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
				return syscall.EIO
			}
			return nil
		}
		if f := d.check(o, true, op.Path); f != nil && !f.Flip {
			return f.Err
		}
		return nil
	}))
}

type files struct{ d *Disk }

func (fs files) OpenFile(name string, flag int, perm os.FileMode) (ssd.File, error) {
	if flag&os.O_CREATE != 0 {
		if f := fs.d.check(OpCreate, false, name); f != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: f.Err}
		}
	}
	inner, err := ssd.OSFS{}.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &file{File: inner, d: fs.d, name: name}, nil
}

func (fs files) Remove(name string) error                     { return os.Remove(name) }
func (fs files) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (fs files) MkdirAll(name string, perm os.FileMode) error { return os.MkdirAll(name, perm) }

func (fs files) SyncDir(name string) error {
	if f := fs.d.check(OpSyncDir, false, name); f != nil {
		return f.Err
	}
	return ssd.OSFS{}.SyncDir(name)
}

// file is a segment file on the simulated disk.
type file struct {
	ssd.File
	d    *Disk
	name string
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	flt := f.d.check(OpRead, false, f.name)
	if flt == nil {
		return f.File.ReadAt(p, off)
	}
	if !flt.Flip {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: flt.Err}
	}
	n, err := f.File.ReadAt(p, off)
	if n > 0 {
		p[f.d.intn(n)] ^= 0x5a
	}
	return n, err
}

func (f *file) WriteAt(bufs [][]byte, off int64) (int, error) {
	flt := f.d.check(OpWrite, false, f.name)
	if flt == nil {
		return f.File.WriteAt(bufs, off)
	}
	if !flt.Torn {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: flt.Err}
	}
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	keep := f.d.intn(total + 1)
	var prefix []byte
	for _, b := range bufs {
		take := min(len(b), keep-len(prefix))
		prefix = append(prefix, b[:take]...)
	}
	if len(prefix) > 0 {
		if _, err := f.File.WriteAt([][]byte{prefix}, off); err != nil {
			return 0, err
		}
	}
	return len(prefix), &os.PathError{Op: "write", Path: f.name, Err: flt.Err}
}

func (f *file) Datasync() error {
	if flt := f.d.check(OpSync, false, f.name); flt != nil {
		return &os.PathError{Op: "fdatasync", Path: f.name, Err: flt.Err}
	}
	return f.File.Datasync()
}

func (f *file) Truncate(size int64) error {
	if flt := f.d.check(OpTruncate, false, f.name); flt != nil {
		return &os.PathError{Op: "truncate", Path: f.name, Err: flt.Err}
	}
	return f.File.Truncate(size)
}

// Fd exposes the descriptor for page-cache advice.
func (f *file) Fd() uintptr {
	if d, ok := f.File.(interface{ Fd() uintptr }); ok {
		return d.Fd()
	}
	return ^uintptr(0)
}
