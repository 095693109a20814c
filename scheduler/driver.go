package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/block"
)

// DriverOptions configures a Driver.
type DriverOptions struct {
	// Core configures the scheduling core.
	Core Options
	// Migrator carries out pull plans. Default: LogMigrator.
	Migrator Migrator
	// MigrationQueue bounds the plans waiting for the Migrator; past it
	// new plans are dropped (and counted), since a late migration is
	// worth little and back-pressure must not slow scheduling. Default: 256.
	MigrationQueue int
	// MigrationTimeout bounds one Migrate call. Default: 30 s.
	MigrationTimeout time.Duration
	// ExpireEvery is how often requests never reported finished are
	// dropped from the decode view (see Core.Expire). Default: 10 s.
	ExpireEvery time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Blocks, when set, counts the blocks of an instance whose block set
	// the caller keeps itself (see Request.Held); Instances reports it in
	// place of the core's count where it answers ok. It is called without
	// the driver's lock held.
	Blocks func(id string) (n int64, ok bool)
}

// EnsureDefaults fills zero fields with their defaults.
func (o *DriverOptions) EnsureDefaults() {
	o.Core.EnsureDefaults()
	if o.Migrator == nil {
		o.Migrator = LogMigrator{Logger: o.Core.Logger}
	}
	if o.MigrationQueue == 0 {
		o.MigrationQueue = 256
	}
	if o.MigrationTimeout == 0 {
		o.MigrationTimeout = 30 * time.Second
	}
	if o.ExpireEvery == 0 {
		o.ExpireEvery = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports every problem at once.
func (o *DriverOptions) Validate() error {
	var errs []error
	if err := o.Core.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.MigrationQueue < 1 {
		errs = append(errs, fmt.Errorf("%w: migration queue %d, want > 0", ErrOptions, o.MigrationQueue))
	}
	if o.MigrationTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%w: migration timeout %v, want > 0", ErrOptions, o.MigrationTimeout))
	}
	if o.ExpireEvery <= 0 {
		errs = append(errs, fmt.Errorf("%w: expire interval %v, want > 0", ErrOptions, o.ExpireEvery))
	}
	return errors.Join(errs...)
}

// Driver runs a Core for a live service: it serializes calls with a mutex,
// reads the clock, and hands pull plans to the Migrator on a goroutine of
// its own (started by Run). All methods are safe for concurrent use.
type Driver struct {
	opts  DriverOptions
	start time.Time
	mu    struct {
		sync.Mutex
		core *Core
	}
	pulls chan Pull

	// Migration counters: queued, dropped (queue full), failed.
	queued, dropped, failed atomic.Int64
	// Decision counters: accepted, and rejected by reason.
	accepted, rejectedTTFT, rejectedTBT atomic.Int64
}

// NewDriver returns a driver around a new Core.
func NewDriver(opts DriverOptions) (*Driver, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	core, err := NewCore(opts.Core)
	if err != nil {
		return nil, err
	}
	d := &Driver{opts: opts, start: opts.Now(), pulls: make(chan Pull, opts.MigrationQueue)}
	d.mu.core = core
	return d, nil
}

// now is the core's clock: time since the driver started, never negative.
func (d *Driver) now() time.Duration { return max(d.opts.Now().Sub(d.start), 0) }

// Run carries out migrations and expires stale requests until ctx is done.
func (d *Driver) Run(ctx context.Context) error {
	tick := time.NewTicker(d.opts.ExpireEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			d.mu.Lock()
			d.mu.core.Expire(d.now())
			d.mu.Unlock()
		case p := <-d.pulls:
			mctx, cancel := context.WithTimeout(ctx, d.opts.MigrationTimeout)
			if err := d.opts.Migrator.Migrate(mctx, p.Keys, p.From, p.To); err != nil {
				d.failed.Add(1)
				d.opts.Core.Logger.WarnContext(ctx, "conductor: migration failed", "from", p.From, "to", p.To, "blocks", len(p.Keys), "err", err)
			}
			cancel()
		}
	}
}

// MigrationStats returns the plans queued, dropped because the queue was
// full, and failed.
func (d *Driver) MigrationStats() (queued, dropped, failed int64) {
	return d.queued.Load(), d.dropped.Load(), d.failed.Load()
}

// Options returns the core's options, defaults filled in.
func (d *Driver) Options() Options { return d.opts.Core }

// AddInstance registers an instance; see Core.AddInstance.
func (d *Driver) AddInstance(in Instance) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.core.AddInstance(in, d.now())
}

// RemoveInstance unregisters an instance; see Core.RemoveInstance.
func (d *Driver) RemoveInstance(id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.core.RemoveInstance(id)
}

// Heartbeat records an instance's load; see Core.Heartbeat.
func (d *Driver) Heartbeat(id string, l Load) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.core.Heartbeat(id, l, d.now())
}

// UpdateBlocks changes an instance's block set; see Core.UpdateBlocks.
func (d *Driver) UpdateBlocks(id string, u BlockUpdate) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.core.UpdateBlocks(id, u)
}

// PrefillDone and Finished report request progress; see Core.
func (d *Driver) PrefillDone(id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.core.PrefillDone(id, d.now())
}

// Finished: see PrefillDone.
func (d *Driver) Finished(id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.core.Finished(id, d.now())
}

// Schedule places a request; see Core.Schedule. A pull plan is queued for
// the Migrator; the returned Decision's Pull.Keys is the caller's own copy.
func (d *Driver) Schedule(req Request) (Decision, error) {
	d.mu.Lock()
	dec, err := d.mu.core.Schedule(req, d.now())
	d.mu.Unlock()
	if err == nil {
		d.count(dec)
	}
	if err != nil || dec.Pull == nil {
		return dec, err
	}
	dec.Pull.Keys = slices.Clone(dec.Pull.Keys)
	select {
	case d.pulls <- *dec.Pull:
		d.queued.Add(1)
	default:
		d.dropped.Add(1)
	}
	return dec, nil
}

// Query returns each holder's prefix of chain; see Core.Query.
func (d *Driver) Query(chain []block.Key) []InstanceMatch {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.core.Query(chain)
}

// Instances returns every instance's status; see Core.Instances.
func (d *Driver) Instances() []InstanceStatus {
	d.mu.Lock()
	out := d.mu.core.Instances(d.now())
	d.mu.Unlock()
	if d.opts.Blocks != nil {
		for i := range out {
			if n, ok := d.opts.Blocks(out[i].ID); ok {
				out[i].Blocks = n
			}
		}
	}
	return out
}

// Instance returns one instance's status.
func (d *Driver) Instance(id string) (InstanceStatus, error) {
	for _, s := range d.Instances() {
		if s.ID == id {
			return s, nil
		}
	}
	return InstanceStatus{}, fmt.Errorf("%w: %q", ErrUnknownInstance, id)
}
