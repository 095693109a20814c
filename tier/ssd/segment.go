package ssd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// segment is one append-only file of records. Space is reserved under the
// tier's lock and filled with positioned writes outside it, so puts to one
// segment proceed in parallel; each put then waits for a flush that began
// after its write, and concurrent puts share one fdatasync (group commit).
type segment struct {
	id   uint32
	path string
	f    File

	// Guarded by the tier's mutex.
	size     int64 // bytes reserved (and, once writers finish, written)
	live     int64 // bytes of records still indexed
	keys     []block.Key
	sealed   bool // no more reservations
	draining bool // chosen for eviction
	writers  int  // puts writing into the segment
	refs     int  // readers and writers using f; the file closes at zero once dropped
	dropped  bool
	indexed  int64 // records below this offset are in the persisted index (a hint)
	failed   bool  // a write or flush failed: sealed, never flushed again (see faults.go)
	// ranks is live bytes by retention rank (tier.Retention.Rank; index
	// tier.NumRanks is hard-pinned): victims are chosen from the lowest.
	ranks [tier.NumRanks + 1]int64

	access atomic.Int64 // tick of the last hit, for segment-granularity LRU
	flush  groupSync
}

func segmentName(id uint32) string { return fmt.Sprintf("%08d.seg", id) }

func parseSegmentName(name string) (uint32, bool) {
	base, ok := strings.CutSuffix(name, ".seg")
	if !ok || len(base) != 8 {
		return 0, false
	}
	n, err := strconv.ParseUint(base, 10, 32)
	return uint32(n), err == nil
}

func createSegment(fs FS, dir string, id uint32) (*segment, error) {
	path := filepath.Join(dir, segmentName(id))
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ssd: creating segment: %w", err)
	}
	// The new file's directory entry must survive a crash for its records to.
	if err := fs.SyncDir(dir); err != nil {
		f.Close()
		fs.Remove(path)
		return nil, fmt.Errorf("ssd: syncing directory %s: %w", dir, err)
	}
	return &segment{id: id, path: path, f: f}, nil
}

// groupSync makes writes durable with as few fdatasyncs as possible: a
// caller whose write has completed needs one flush that started after that;
// whoever finds none running starts one, everyone else waits for it.
type groupSync struct {
	mu        sync.Mutex
	cond      *sync.Cond
	started   uint64
	completed uint64
	running   bool
	err       error
}

func (g *groupSync) wait(f File) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	target := g.started + 1
	for g.completed < target {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		g.started++
		gen := g.started
		g.mu.Unlock()
		err := f.Datasync()
		g.mu.Lock()
		g.running = false
		g.completed = gen
		if err != nil {
			// A failed fsync leaves the file's durability unknown: the
			// kernel may have dropped the dirty pages and cleared the
			// error, so a later fsync could succeed without them. Every
			// later caller fails too rather than trusting it (faults.go).
			g.err = fmt.Errorf("ssd: fdatasync: %w", err)
		}
		g.cond.Broadcast()
	}
	return g.err
}
