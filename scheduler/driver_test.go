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

// TestScheduleHeld checks prefixes a caller matched itself: they place the
// request like reported blocks do, count only when longer than the core's
// own match, are ignored for instances that left, and are checked.
func TestScheduleHeld(t *testing.T) {
	held := map[string]int64{"p1": 7}
	d, err := NewDriver(DriverOptions{Blocks: func(id string) (int64, bool) {
		n, ok := held[id]
		return n, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p0", "p1"} {
		if err := d.AddInstance(Instance{ID: id, Role: RolePrefill}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.AddInstance(Instance{ID: "s", Role: RoleStore}); err != nil {
		t.Fatal(err)
	}
	chain := testChain("h", 8)
	cases := []struct {
		name       string
		held       []HeldPrefix
		wantOn     string
		wantPrefix int
		wantErr    error
	}{
		{"none", nil, "p0", 0, nil},
		{"p1 holds six", []HeldPrefix{{"p0", 0}, {"p1", 6}}, "p1", 6, nil},
		{"gone and store ignored", []HeldPrefix{{"ghost", 8}, {"s", 8}}, "p0", 0, nil},
		{"too long", []HeldPrefix{{"p1", 9}}, "", 0, ErrRequest},
		{"negative", []HeldPrefix{{"p1", -1}}, "", 0, ErrRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dec, err := d.Schedule(Request{Keys: chain, Held: c.held})
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("got %v, want %v", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Every case starts with equal, empty queues.
			defer func() {
				for _, id := range []string{"p0", "p1"} {
					if err := d.Heartbeat(id, Load{}); err != nil {
						t.Fatal(err)
					}
				}
			}()
			bs := d.Options().BlockSize
			if dec.Prefill != c.wantOn || dec.LocalPrefixTokens != c.wantPrefix*bs {
				t.Fatalf("placed on %s reusing %d tokens, want %s and %d", dec.Prefill, dec.LocalPrefixTokens, c.wantOn, c.wantPrefix*bs)
			}
		})
	}
	for _, st := range d.Instances() {
		want := int64(0)
		if st.ID == "p1" {
			want = 7
		}
		if st.Blocks != want {
			t.Fatalf("%s reports %d blocks, want %d", st.ID, st.Blocks, want)
		}
	}
}
