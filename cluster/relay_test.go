package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// relayAll relays k from n into a buffer.
func relayAll(n *Node, t *testing.T, k block.Key) ([]byte, tier.Origin, error) {
	var buf bytes.Buffer
	var o tier.Origin
	err := n.Relay(t.Context(), k, func(r Relayed) error {
		o = r.Origin
		_, err := r.WriteTo(&buf)
		return err
	})
	return buf.Bytes(), o, err
}

func TestRelay(t *testing.T) {
	c := newTestCluster(t, 2, nil) // Admit: second-hit
	c.waitFormed()
	a, b := c.nodes[0], c.nodes[1]
	k := testKey(1)
	want := value(1, 1<<20)
	putIndexed(t, a, b, k, want, tier.PutOptions{Meta: []byte("meta")})
	got, o, err := relayAll(b.n, t, k)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || o.Source != "n0" || o.Level != tier.RemoteLevel || string(o.Info.Meta) != "meta" ||
		o.Info.Size != int64(len(want)) || o.Info.Checksum != block.Checksum(want) {
		t.Fatalf("relayed %d bytes, origin %+v", len(got), o)
	}
	if b.store.Contains(k) {
		t.Fatal("a relayed block was kept")
	}
	// The second read of it is the one that keeps a copy: not relayed.
	if _, _, err := relayAll(b.n, t, k); !errors.Is(err, ErrNotRelayed) {
		t.Fatalf("second relay: %v, want ErrNotRelayed", err)
	}
	// A block nobody holds is a miss.
	if _, _, err := relayAll(b.n, t, testKey(99)); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("missing block: %v", err)
	}
	// send's refusal is Relay's answer, and no bytes were read for it.
	refuse := errors.New("not for you")
	k2 := testKey(2)
	putIndexed(t, a, b, k2, value(2, 1000), tier.PutOptions{})
	if err := b.n.Relay(t.Context(), k2, func(Relayed) error { return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("refused relay: %v", err)
	}
}

// TestRelayFailover: the node a block was last read from is gone; the
// relay finds the other holder.
func TestRelayFailover(t *testing.T) {
	c := newTestCluster(t, 3, func(o *Options) { o.Admit = AdmitNever })
	c.waitFormed()
	a, b, d := c.nodes[0], c.nodes[1], c.nodes[2]
	k := testKey(1)
	want := value(1, 200<<10)
	for _, n := range []*testNode{a, d} {
		if _, err := n.store.Put(t.Context(), k, want, tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() error {
		if got := holderNames(t, b.n, k); len(got) != 2 {
			return fmt.Errorf("holders %v", got)
		}
		return nil
	})
	for range 3 {
		got, _, err := relayAll(b.n, t, k)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("relay: %d bytes, %v", len(got), err)
		}
	}
	ids, ok := b.n.locs.Get(k)
	if !ok || len(ids) != 1 {
		t.Fatalf("location cache %v %v", ids, ok)
	}
	victim := a
	if ids[0] == d.n.id {
		victim = d
	}
	if c.nodes[0] == victim {
		// Stopping the leader would test elections too; keep it simple.
		victim.store.Delete(k)
	} else {
		victim.stop()
	}
	got, o, err := relayAll(b.n, t, k)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("relay after losing %s: %d bytes, %v", victim.n.Name(), len(got), err)
	}
	if o.Source == victim.n.Name() {
		t.Fatalf("relayed from %s, which is gone", o.Source)
	}
}
