package ssd

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/policy"
)

// Options configures an SSD tier. A field with a YAML name is an
// operator's setting, the ssd section of yuebing serve's configuration
// (YUEBING_SSD_* variables); the others are set in code.
type Options struct {
	// Dir holds the tier's files. Required. Segments go under Dir/segments,
	// the index under Dir/index.
	Dir string `yaml:"-"`
	// Capacity bounds the bytes of segment files. Required.
	Capacity int64 `yaml:"-"`
	// Compression is "none", "s2" or "zstd". Default "none": KV tensors
	// of bf16 or fp8 compress little (docs/benchmarks.md), while zero-heavy
	// blocks (padding, sparse caches) compress well.
	Compression string `yaml:"compression"`
	// SegmentSize is the size at which a segment is sealed and a new one
	// started, and the unit of eviction. Default Capacity/64 clamped to
	// [1 MiB, 64 MiB]. A block larger than this gets a segment of its own.
	SegmentSize int64 `yaml:"-"`
	// MaxBlockSize is the largest block accepted. Default
	// min(256 MiB, Capacity/2): a block must not displace the whole tier.
	MaxBlockSize int64 `yaml:"-"`
	// NoSync acknowledges puts before their data is flushed to the device.
	// Default false: a put returns only once it survives a crash.
	NoSync bool `yaml:"no_sync"`
	// KeepPageCache leaves segment pages in the kernel's page cache after
	// reads and durable writes. Default false: the tier drops them
	// (posix_fadvise DONTNEED), as caches that use O_DIRECT do, because the
	// DRAM tier is the cache; a second copy in the page cache would take
	// memory the operator gave neither tier, and make SSD reads look faster
	// than they are under memory pressure.
	KeepPageCache bool `yaml:"-"`
	// OfferEvicted hands the evict handler each evicted block's bytes, read
	// back and verified before its segment is dropped, so a hierarchy can
	// demote it to a tier below (S3). It costs a read of the evicted
	// blocks. Default false: the handler gets nil handles (the SSD tier is
	// the bottom, eviction means gone).
	OfferEvicted bool `yaml:"-"`
	// MaxPinnedFraction bounds the share of Capacity that soft pins may hold.
	// Default 0.5.
	MaxPinnedFraction float64 `yaml:"-"`
	// IndexCacheSize is pebble's block cache, in bytes. Default 8 MiB: the
	// tier keeps its own in-memory map, pebble is read only at start-up.
	IndexCacheSize int64 `yaml:"-"`
	// Policy is the per-block eviction policy of the pebble-values layout
	// (OpenPebble). Default "lru". The segment layout evicts whole segments
	// in least-recently-read order.
	Policy string `yaml:"-"`
	// Files is the file layer under the segment files. Default OSFS{}.
	// Tests set a faulty one (ssdtest.Disk).
	Files FS `yaml:"-"`
	// IndexFS is the file system under the pebble index (and under the
	// values of OpenPebble). Default vfs.Default. Tests wrap it with
	// pebble's errorfs.
	IndexFS vfs.FS `yaml:"-"`
	// ProbeInterval is the first wait before a degraded tier checks the
	// device again; each failed check doubles it up to MaxProbeInterval.
	// Default 1s.
	ProbeInterval time.Duration `yaml:"-"`
	// MaxProbeInterval bounds the wait between checks of a degraded
	// tier's device. Default 30s.
	MaxProbeInterval time.Duration `yaml:"-"`
	// Name in stats and logs. Default "ssd".
	Name string `yaml:"-"`
	// Now is the clock for soft pins. Default time.Now.
	Now func() time.Time `yaml:"-"`
	// Logger. Default slog.Default().
	Logger *slog.Logger `yaml:"-"`
}

// EnsureDefaults fills in zero fields.
func (o *Options) EnsureDefaults() {
	if o.Compression == "" {
		o.Compression = "none"
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = min(max(o.Capacity/64, 1<<20), 64<<20)
	}
	if o.MaxBlockSize == 0 {
		o.MaxBlockSize = min(256<<20, o.Capacity/2)
	}
	if o.MaxPinnedFraction == 0 {
		o.MaxPinnedFraction = 0.5
	}
	if o.IndexCacheSize == 0 {
		o.IndexCacheSize = 8 << 20
	}
	if o.Policy == "" {
		o.Policy = "lru"
	}
	if o.Files == nil {
		o.Files = OSFS{}
	}
	if o.IndexFS == nil {
		o.IndexFS = vfs.Default
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = time.Second
	}
	if o.MaxProbeInterval == 0 {
		o.MaxProbeInterval = 30 * time.Second
	}
	if o.Name == "" {
		o.Name = "ssd"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	_, err := o.check()
	return err
}

// parsed is what Options' strings name.
type parsed struct {
	codec  block.Codec
	policy *policy.Classed[block.Key] // used by the pebble-values layout, a queue per retention rank
}

// check validates o and returns what its strings name: Open and
// OpenPebble use that, so each string is parsed in one place and no error
// of it is dropped.
func (o *Options) check() (parsed, error) {
	var p parsed
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("ssd: Dir is required"))
	}
	if o.Capacity < 1<<20 {
		errs = append(errs, fmt.Errorf("ssd: Capacity %d bytes is below the minimum of 1 MiB", o.Capacity))
	}
	var err error
	if p.codec, err = block.ParseCodec(o.Compression); err != nil {
		errs = append(errs, fmt.Errorf("ssd: Compression: %w", err))
	}
	if o.SegmentSize < 64<<10 || o.SegmentSize > o.Capacity {
		errs = append(errs, fmt.Errorf("ssd: SegmentSize %d must be in [64 KiB, Capacity]", o.SegmentSize))
	}
	if o.MaxBlockSize <= 0 || o.MaxBlockSize > o.Capacity || o.MaxBlockSize > block.MaxPayload {
		errs = append(errs, fmt.Errorf("ssd: MaxBlockSize %d must be in (0, min(Capacity, 4 GiB)]", o.MaxBlockSize))
	}
	if o.MaxPinnedFraction < 0 || o.MaxPinnedFraction > 1 {
		errs = append(errs, fmt.Errorf("ssd: MaxPinnedFraction %v must be in [0, 1]", o.MaxPinnedFraction))
	}
	if o.ProbeInterval <= 0 || o.MaxProbeInterval < o.ProbeInterval {
		errs = append(errs, fmt.Errorf("ssd: ProbeInterval %v must be positive and at most MaxProbeInterval %v", o.ProbeInterval, o.MaxProbeInterval))
	}
	if p.policy, err = policy.NewClassed[block.Key](o.Policy, o.Capacity, tier.NumRanks); err != nil {
		errs = append(errs, fmt.Errorf("ssd: Policy: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return parsed{}, err
	}
	return p, nil
}

func (o *Options) pinLimit() int64 { return int64(o.MaxPinnedFraction * float64(o.Capacity)) }
