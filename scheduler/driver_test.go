package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
)

func TestDriverDropsWhenQueueFull(t *testing.T) {
	block := make(chan struct{})
	d, err := NewDriver(DriverOptions{MigrationQueue: 1, Migrator: migratorFunc(func() { <-block })})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p0", "p1"} {
		if err := d.AddInstance(Instance{ID: id, Role: RolePrefill}); err != nil {
			t.Fatal(err)
		}
	}
	chain := testChain("c", 8)
	if err := d.UpdateBlocks("p0", BlockUpdate{Added: chain}); err != nil {
		t.Fatal(err)
	}
	// p0 is busy, so every request pulls to p1 (not running: nothing drains).
	if err := d.Heartbeat("p0", Load{QueueTime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		dec, err := d.Schedule(Request{Keys: chain})
		if err != nil || dec.Pull == nil {
			t.Fatalf("Schedule: %+v, %v; want a pull", dec, err)
		}
		if err := d.Heartbeat("p1", Load{}); err != nil {
			t.Fatal(err)
		}
	}
	close(block)
	if q, dropped, _ := d.MigrationStats(); q != 1 || dropped != 2 {
		t.Fatalf("queued %d, dropped %d; want 1 and 2", q, dropped)
	}
}

type migratorFunc func()

func (f migratorFunc) Migrate(context.Context, []block.Key, string, string) error {
	f()
	return errors.New("unused")
}
