package tier

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/yuebing/yuebing/tier/policy"
)

// Promotion admission policies: when a hit in a lower tier copies the block
// up into the top tier.
const (
	PromoteAlways    = "always"     // every lower-tier hit
	PromoteSecondHit = "second-hit" // a block hit again while it is among recent lower-tier hits
	PromoteNever     = "never"
)

// Behaviours when the demotion queue is full.
const (
	DemoteWait = "wait" // the put that evicted waits for room in the queue (back-pressure)
	DemoteDrop = "drop" // the evicted block is dropped instead of demoted
)

// HierarchyOptions configures a Hierarchy.
type HierarchyOptions struct {
	// DemoteQueueBytes bounds the bytes of evicted blocks waiting to be
	// written to the next tier, at each boundary between two tiers (DRAM
	// into SSD, SSD into S3: twice this with three tiers). They stay
	// readable, and their memory stays allocated in the upper tier, until
	// written. Default 256 MiB.
	DemoteQueueBytes int64
	// DemoteWorkers write queued demotions, at each tier boundary. Default 2.
	DemoteWorkers int
	// DemoteWhenFull is DemoteWait (default) or DemoteDrop.
	DemoteWhenFull string
	// Promote is PromoteAlways, PromoteSecondHit (default) or PromoteNever.
	// Second-hit keeps one-off reads of cold blocks (a scan, a replay) from
	// flushing the top tier.
	Promote string
	// PromoteQueueBytes bounds blocks read from a lower tier waiting to be
	// copied up; promotions beyond it are skipped. Default 64 MiB.
	PromoteQueueBytes int64
	// RecentHits is how many lower-tier hits second-hit admission remembers.
	// Default 65536.
	RecentHits int
	// Admission picks which blocks evicted from the top tier are written
	// to the next: policy.AdmitAll (default, every one), policy.AdmitChain
	// or policy.AdmitLearned; see docs/policies.md. The chain policies need
	// puts with chain parents (PutOptions.Parent) to tell chains apart.
	Admission string
	// AdmissionGhost is how many blocks gone from every tier the admission
	// policy remembers, so one that comes back counts as seen before.
	// Default 65536 (a few MiB).
	AdmissionGhost int
	// Now is the clock for pins. Default time.Now.
	Now func() time.Time
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills in zero fields.
func (o *HierarchyOptions) EnsureDefaults() {
	if o.DemoteQueueBytes == 0 {
		o.DemoteQueueBytes = 256 << 20
	}
	if o.DemoteWorkers == 0 {
		o.DemoteWorkers = 2
	}
	if o.DemoteWhenFull == "" {
		o.DemoteWhenFull = DemoteWait
	}
	if o.Promote == "" {
		o.Promote = PromoteSecondHit
	}
	if o.PromoteQueueBytes == 0 {
		o.PromoteQueueBytes = 64 << 20
	}
	if o.RecentHits == 0 {
		o.RecentHits = 65536
	}
	if o.Admission == "" {
		o.Admission = policy.AdmitAll
	}
	if o.AdmissionGhost == 0 {
		o.AdmissionGhost = 65536
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every invalid field.
func (o *HierarchyOptions) Validate() error {
	var errs []error
	if o.DemoteQueueBytes <= 0 {
		errs = append(errs, fmt.Errorf("tier: DemoteQueueBytes %d must be positive", o.DemoteQueueBytes))
	}
	if o.DemoteWorkers <= 0 || o.DemoteWorkers > 64 {
		errs = append(errs, fmt.Errorf("tier: DemoteWorkers %d must be in [1, 64]", o.DemoteWorkers))
	}
	if o.DemoteWhenFull != DemoteWait && o.DemoteWhenFull != DemoteDrop {
		errs = append(errs, fmt.Errorf("tier: DemoteWhenFull %q: want %q or %q", o.DemoteWhenFull, DemoteWait, DemoteDrop))
	}
	switch o.Promote {
	case PromoteAlways, PromoteSecondHit, PromoteNever:
	default:
		errs = append(errs, fmt.Errorf("tier: Promote %q: want %q, %q or %q", o.Promote, PromoteAlways, PromoteSecondHit, PromoteNever))
	}
	if o.PromoteQueueBytes <= 0 {
		errs = append(errs, fmt.Errorf("tier: PromoteQueueBytes %d must be positive", o.PromoteQueueBytes))
	}
	if o.RecentHits <= 0 {
		errs = append(errs, fmt.Errorf("tier: RecentHits %d must be positive", o.RecentHits))
	}
	if !slices.Contains(policy.AdmissionNames, o.Admission) {
		errs = append(errs, fmt.Errorf("tier: Admission %q: want one of %v", o.Admission, policy.AdmissionNames))
	}
	if o.AdmissionGhost < 0 {
		errs = append(errs, fmt.Errorf("tier: AdmissionGhost %d must not be negative", o.AdmissionGhost))
	}
	return errors.Join(errs...)
}
