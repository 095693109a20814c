package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/yuebing/yuebing/block"
)

// Executor carries out the core's actions. The cluster layer implements it
// over the transfer service: Copy makes node `to` fetch key from node `from`
// (verifying its checksum) and store it; Drop makes node delete its copy.
// Both must be safe for concurrent use and must return when ctx is done.
// Copying a block the target already has, or dropping one the node no longer
// has, must succeed: actions can cross the node's own events.
type Executor interface {
	Copy(ctx context.Context, key block.Key, from, to uint32) error
	Drop(ctx context.Context, key block.Key, node uint32) error
}

// DriverOptions configures a Driver.
type DriverOptions struct {
	// Interval is the time between ticks; the driver also ticks right after
	// an action completes, so freed in-flight room is used at once.
	// Default 1s.
	Interval time.Duration
	// Now is the clock fed to the core. Default time.Now.
	Now func() time.Time
	// Logger gets failed actions at Warn and completed ones at Debug.
	// Default: discard.
	Logger *slog.Logger
	// Observe, if set, is called after each action with its outcome and
	// duration (for metrics). It runs on the action's goroutine.
	Observe func(a Action, err error, took time.Duration)
}

// EnsureDefaults fills in zero fields.
func (o *DriverOptions) EnsureDefaults() {
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every invalid field.
func (o *DriverOptions) Validate() error {
	var errs []error
	if o.Interval <= 0 {
		errs = append(errs, fmt.Errorf("replicate: Interval %v must be positive", o.Interval))
	}
	return errors.Join(errs...)
}

// Driver runs a Core: it ticks it, executes its actions on an Executor, one
// goroutine per action (their number is bounded by Options.MaxInFlight, and
// each is cut off at Options.ActionTimeout), and steps the outcomes back in as
// Done events. Events from the cluster go in through Step. All methods are
// safe for concurrent use; the core is only ever used under the driver's
// mutex, and never while an executor call runs.
type Driver struct {
	exec    Executor
	opts    DriverOptions
	timeout time.Duration
	kick    chan struct{}
	cancel  context.CancelFunc
	loop    sync.WaitGroup // the tick loop
	actions sync.WaitGroup // executor calls

	mu struct {
		sync.Mutex
		core   *Core
		closed bool
	}
}

// NewDriver starts driving core. The driver owns core from now on: use it
// only through Step and Inspect. Close stops the driver. It panics if opts are
// invalid.
func NewDriver(core *Core, exec Executor, opts DriverOptions) *Driver {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		panic("BUG: " + err.Error())
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Driver{
		exec:    exec,
		opts:    opts,
		timeout: core.opts.ActionTimeout,
		kick:    make(chan struct{}, 1),
		cancel:  cancel,
	}
	d.mu.core = core
	d.loop.Go(func() { d.run(ctx) })
	return d
}

// Step feeds one event to the core at the driver's clock.
func (d *Driver) Step(ev Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return ErrClosed
	}
	return d.mu.core.Step(d.opts.Now(), ev)
}

// Inspect runs fn with the core under the driver's lock, for reads such as
// Stats, Top and Block. fn must not keep the core.
func (d *Driver) Inspect(fn func(c *Core)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn(d.mu.core)
}

// Close stops ticking, cancels the actions in flight and waits for them and
// for the loop. It returns ErrClosed if the driver was already closed.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	d.mu.closed = true
	d.mu.Unlock()
	d.cancel()
	d.loop.Wait()
	d.actions.Wait()
	return nil
}

func (d *Driver) run(ctx context.Context) {
	t := time.NewTicker(d.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.kick:
		}
		d.mu.Lock()
		if d.mu.closed {
			d.mu.Unlock()
			return
		}
		acts := d.mu.core.Tick(d.opts.Now())
		// Started under the lock, so Close cannot pass actions.Wait
		// before they are counted.
		for _, a := range acts {
			d.actions.Go(func() { d.execute(ctx, a) })
		}
		d.mu.Unlock()
	}
}

func (d *Driver) execute(ctx context.Context, a Action) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	start := time.Now()
	var err error
	if a.Kind == Copy {
		err = d.exec.Copy(ctx, a.Key, a.From, a.Node)
	} else {
		err = d.exec.Drop(ctx, a.Key, a.Node)
	}
	took := time.Since(start)
	if err != nil {
		d.opts.Logger.Warn("replicate: action failed", "action", a.String(), "err", err)
	} else {
		d.opts.Logger.Debug("replicate: action done", "action", a.String(), "took", took)
	}
	if d.opts.Observe != nil {
		d.opts.Observe(a, err, took)
	}
	d.mu.Lock()
	if !d.mu.closed {
		// A Done cannot be invalid.
		_ = d.mu.core.Step(d.opts.Now(), Done{ID: a.ID, Err: err})
	}
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default: // a tick is already due
	}
}
