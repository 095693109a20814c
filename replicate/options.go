package replicate

import (
	"errors"
	"fmt"
	"time"
)

// Options configures a Core. The zero value gives the documented defaults;
// docs/cluster.md explains how they play together. The fields with a YAML
// name are settings of the server's cluster section (cluster.hot_hits,
// ...); the others are set by code.
type Options struct {
	// Window is how far back heat looks: a block's heat is its hits in the
	// last Window. Default 60s.
	Window time.Duration `yaml:"heat_window"`
	// Buckets cuts the window into slots; heat slides by Window/Buckets.
	// Default 6 (10 s slots), at most 8.
	Buckets int `yaml:"-"`

	// HotHits is the heat at which a block gains its first extra replica.
	// Default 32 hits per window.
	HotHits uint32 `yaml:"hot_hits"`
	// HotFactor is how much more heat each further replica needs: a block
	// wants 2 replicas at HotHits, 3 at HotHits*HotFactor, 4 at
	// HotHits*HotFactor^2, and so on. Default 2.
	HotFactor float64 `yaml:"-"`
	// MaxReplicas caps the replicas heat alone can ask for (a block's
	// desired count is honoured above it). Default 8.
	MaxReplicas int `yaml:"max_replicas"`
	// KeepRatio is the hysteresis of hot replicas: a replica gained at heat
	// h is kept while heat stays at or above KeepRatio*h. Default 0.5.
	KeepRatio float64 `yaml:"-"`
	// Cooldown is how long a block must have more replicas than it needs
	// before the extra ones are dropped. Default: Window.
	Cooldown time.Duration `yaml:"-"`

	// TrackFloor is the sketch estimate at which a block's heat starts being
	// counted exactly, in a window of its own. Default: a quarter of
	// HotHits, at least 2 (8 with the default HotHits), so a block is
	// tracked well before it is hot.
	TrackFloor uint32 `yaml:"-"`
	// MaxHot bounds the blocks tracked for their heat; when it is reached, a
	// new block replaces the coldest of a sample of tracked blocks, if it is
	// hotter. Each tracked block costs about 300 bytes. Default 65536.
	MaxHot int `yaml:"-"`
	// SketchWidth is the number of counters per row of the count-min sketch
	// (4 rows of 2 bytes), a power of two. Default 65536: 512 KiB.
	SketchWidth int `yaml:"-"`

	// MaxInFlight bounds the actions emitted and not yet acknowledged,
	// cluster-wide. Default 64.
	MaxInFlight int `yaml:"-"`
	// MaxInFlightPerNode bounds the copies in flight per node, counted at
	// both source and target, so a repair storm cannot saturate one NIC.
	// Default 4.
	MaxInFlightPerNode int `yaml:"-"`
	// ActionTimeout is how long an action may go unacknowledged before it is
	// taken as failed. Default 2m.
	ActionTimeout time.Duration `yaml:"-"`
	// RetryBackoff is how long a block waits after a failed copy, or after
	// finding no node to copy to, before it is tried again. Default 5s.
	RetryBackoff time.Duration `yaml:"-"`
	// ScanPerTick is how many tracked blocks each Tick re-examines for
	// cooled replicas, lapsed pins and blocks that no longer need tracking.
	// Default 4096.
	ScanPerTick int `yaml:"-"`

	// DefaultBlockSize is the size assumed for a block whose size was never
	// reported, to reserve room on copy targets. Default 16 MiB.
	DefaultBlockSize int64 `yaml:"-"`
	// MaxNodes bounds node ids: every id must be below it. Default 4096.
	MaxNodes int `yaml:"-"`
	// Seed seeds the heat sketch's hash and the sampling of MaxHot
	// replacements. The same Options (seed included) and the same events
	// give the same actions. Default 0; use a random seed in production, so
	// that clients who choose keys cannot predict sketch collisions.
	Seed uint64 `yaml:"-"`
}

// EnsureDefaults fills in zero fields.
func (o *Options) EnsureDefaults() {
	if o.Window == 0 {
		o.Window = time.Minute
	}
	if o.Buckets == 0 {
		o.Buckets = 6
	}
	if o.HotHits == 0 {
		o.HotHits = 32
	}
	if o.HotFactor == 0 {
		o.HotFactor = 2
	}
	if o.MaxReplicas == 0 {
		o.MaxReplicas = 8
	}
	if o.KeepRatio == 0 {
		o.KeepRatio = 0.5
	}
	if o.Cooldown == 0 {
		o.Cooldown = o.Window
	}
	if o.TrackFloor == 0 {
		o.TrackFloor = max(2, o.HotHits/4)
	}
	if o.MaxHot == 0 {
		o.MaxHot = 65536
	}
	if o.SketchWidth == 0 {
		o.SketchWidth = 65536
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 64
	}
	if o.MaxInFlightPerNode == 0 {
		o.MaxInFlightPerNode = 4
	}
	if o.ActionTimeout == 0 {
		o.ActionTimeout = 2 * time.Minute
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = 5 * time.Second
	}
	if o.ScanPerTick == 0 {
		o.ScanPerTick = 4096
	}
	if o.DefaultBlockSize == 0 {
		o.DefaultBlockSize = 16 << 20
	}
	if o.MaxNodes == 0 {
		o.MaxNodes = 4096
	}
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrOptions}, args...)...))
	}
	if o.Buckets < 1 || o.Buckets > maxBuckets {
		bad("Buckets %d must be in [1, %d]", o.Buckets, maxBuckets)
	}
	if o.Window <= 0 || (o.Buckets > 0 && o.Window < time.Duration(o.Buckets)) {
		bad("Window %v must be positive and at least Buckets nanoseconds", o.Window)
	}
	if o.HotFactor <= 1 {
		bad("HotFactor %v must be above 1", o.HotFactor)
	}
	if o.MaxReplicas < 1 || o.MaxReplicas > 255 {
		bad("MaxReplicas %d must be in [1, 255]", o.MaxReplicas)
	}
	if o.KeepRatio <= 0 || o.KeepRatio > 1 {
		bad("KeepRatio %v must be in (0, 1]", o.KeepRatio)
	}
	if o.Cooldown < 0 {
		bad("Cooldown %v must not be negative", o.Cooldown)
	}
	if o.MaxHot < 1 {
		bad("MaxHot %d must be positive", o.MaxHot)
	}
	if o.SketchWidth < 64 || o.SketchWidth > 1<<24 || o.SketchWidth&(o.SketchWidth-1) != 0 {
		bad("SketchWidth %d must be a power of two in [64, 1<<24]", o.SketchWidth)
	}
	if o.MaxInFlight < 1 {
		bad("MaxInFlight %d must be positive", o.MaxInFlight)
	}
	if o.MaxInFlightPerNode < 1 {
		bad("MaxInFlightPerNode %d must be positive", o.MaxInFlightPerNode)
	}
	if o.ActionTimeout <= 0 {
		bad("ActionTimeout %v must be positive", o.ActionTimeout)
	}
	if o.RetryBackoff < 0 {
		bad("RetryBackoff %v must not be negative", o.RetryBackoff)
	}
	if o.ScanPerTick < 1 {
		bad("ScanPerTick %d must be positive", o.ScanPerTick)
	}
	if o.DefaultBlockSize < 1 {
		bad("DefaultBlockSize %d must be positive", o.DefaultBlockSize)
	}
	if o.MaxNodes < 1 || o.MaxNodes > 1<<20 {
		bad("MaxNodes %d must be in [1, 1<<20]", o.MaxNodes)
	}
	return errors.Join(errs...)
}
