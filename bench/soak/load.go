package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
)

// soakWorker drives one front end over its own slots, so that every slot
// sees its writes and reads in order and the checks need no locks.
type soakWorker struct {
	id    int
	kind  byte
	node  *bench.Node // writes (and RESP reads) go here
	first uint64      // first slot
	slots []soakSlot
	rng   *rand.Rand
	buf   []byte
	resp  *respConn
}

// soakSlot is what the worker knows of one slot.
type soakSlot struct {
	// acked is the latest version the node acknowledged storing (0:
	// none); tried the latest version sent, acknowledged or not.
	acked, tried uint64
	// ackedLife is the node's life at that acknowledgement (RESP).
	ackedLife int64
	// refused are versions the node answered with an error for: never
	// stored, so never to be read (RESP).
	refused map[uint64]bool
}

// workers lays the load out: Workers goroutines per front end, each with
// its share of that front end's slots, spread over the nodes. The slots of
// all front ends together hold Overcommit times the nodes' capacity at the
// mean value size.
func (s *soak) workers() []*soakWorker {
	o := &s.o
	kinds := []byte{kindBlock, kindObject, kindRESP, kindBatch}
	mean := int64(o.MinValue+o.MaxValue) / 2
	ws := float64((o.DRAMCapacity + o.SSDCapacity) * int64(len(s.nodes)))
	perKind := max(int64(o.Overcommit*ws)/mean/int64(len(kinds)), int64(o.Workers*o.BatchSize))
	perWorker := perKind / int64(o.Workers)
	var out []*soakWorker
	for _, k := range kinds {
		for i := range o.Workers {
			id := len(out)
			out = append(out, &soakWorker{
				id: id, kind: k, node: s.nodes[id%len(s.nodes)],
				first: uint64(i) * uint64(perWorker), slots: make([]soakSlot, perWorker),
				rng: soakRand(o.Seed, id), buf: make([]byte, o.MaxValue),
			})
		}
	}
	return out
}

// usable waits while n is being verified after a restart; it reports
// false when the load is over.
func usable(ctx context.Context, n *bench.Node) bool {
	for n.State.Load() == bench.NodeVerifying {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return ctx.Err() == nil
}

// reader picks the node to read from: in a cluster any node not being
// verified (reads cross nodes), else the worker's own.
func (s *soak) reader(w *soakWorker) *bench.Node {
	if len(s.nodes) == 1 || w.kind == kindRESP {
		return w.node // the RESP key table is per node
	}
	n := s.nodes[w.rng.IntN(len(s.nodes))]
	if n.State.Load() == bench.NodeVerifying {
		return w.node
	}
	return n
}

func (s *soak) runWorker(ctx context.Context, w *soakWorker) {
	defer func() {
		if w.resp != nil {
			w.resp.Close()
		}
	}()
	for usable(ctx, w.node) {
		i := w.rng.IntN(len(w.slots))
		write := w.slots[i].tried == 0 || w.rng.IntN(2) == 0
		var err error
		switch w.kind {
		case kindBlock, kindObject:
			if write {
				err = s.putOne(ctx, w, i)
			} else {
				err = s.getOne(ctx, w, i)
			}
		case kindBatch:
			if write {
				err = s.putBatch(ctx, w)
			} else {
				err = s.getBatch(ctx, w)
			}
		case kindRESP:
			if write {
				err = s.respSet(ctx, w, i)
			} else {
				err = s.respGet(ctx, w, i)
			}
		}
		if err != nil && ctx.Err() == nil {
			// A node being killed refuses connections: do not spin.
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// opName names a request for the error counts: "block_put", "object_get".
func opName(kind byte, verb string) string { return kindNames[kind] + "_" + verb }

func (s *soak) value(w *soakWorker, kind byte, slot, version uint64) []byte {
	b := w.buf[:soakSize(kind, slot, version, s.o.MinValue, s.o.MaxValue)]
	fillSoakValue(b, kind, slot, version)
	return b
}

func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 30*time.Second)
}

func (s *soak) putOne(ctx context.Context, w *soakWorker, i int) error {
	st := &w.slots[i]
	slot := w.first + uint64(i)
	st.tried++
	v := st.tried
	data := s.value(w, w.kind, slot, v)
	c := w.node.Client()
	cctx, cancel := opCtx(ctx)
	defer cancel()
	t0 := time.Now()
	var err error
	if w.kind == kindObject {
		_, err = c.PutObject(cctx, soakNS, soakObjectName(slot, v), data)
	} else {
		_, err = c.Put(cctx, soakNS, soakKey(w.kind, slot, v), data)
	}
	s.done(ctx, opName(w.kind, "put"), t0, err)
	if err == nil {
		st.acked = v
		s.putBytes.Add(int64(len(data)))
	}
	return err
}

// getOne reads the latest acknowledged version of a slot, or now and then
// an older one: either may be gone, but bytes read must be exactly that
// version's.
func (s *soak) getOne(ctx context.Context, w *soakWorker, i int) error {
	st := &w.slots[i]
	if st.acked == 0 {
		return s.putOne(ctx, w, i)
	}
	slot := w.first + uint64(i)
	v := st.acked
	if w.rng.IntN(10) == 0 {
		v = 1 + w.rng.Uint64N(st.tried)
	}
	n := s.reader(w)
	c := n.Client()
	cctx, cancel := opCtx(ctx)
	defer cancel()
	t0 := time.Now()
	var data []byte
	var err error
	if w.kind == kindObject {
		data, _, err = c.GetObject(cctx, soakNS, soakObjectName(slot, v))
	} else {
		data, _, err = c.Get(cctx, soakKey(w.kind, slot, v), client.GetOptions{})
	}
	return s.checkRead(ctx, n, t0, err, data, w.kind, slot, v)
}

// checkRead records a read of an immutable (kind, slot, version) value.
func (s *soak) checkRead(ctx context.Context, n *bench.Node, t0 time.Time, err error, data []byte, kind byte, slot, v uint64) error {
	switch {
	case errors.Is(err, client.ErrNotFound):
		s.done(ctx, opName(kind, "get"), t0, nil)
		s.misses.Add(1)
		return nil
	case errors.Is(err, client.ErrChecksum):
		s.done(ctx, opName(kind, "get"), t0, nil)
		s.corruptRead(n, "%s slot %d v%d: %v", kindNames[kind], slot, v, err)
		return nil
	case err != nil:
		s.done(ctx, opName(kind, "get"), t0, err)
		return err
	}
	s.done(ctx, opName(kind, "get"), t0, nil)
	s.hits.Add(1)
	got, perr := parseSoakValue(data)
	if perr != nil || got.kind != kind || got.slot != slot || got.version != v {
		s.corruptRead(n, "%s slot %d v%d: read %d bytes: %v (header %s slot %d v%d)", kindNames[kind], slot, v, len(data), perr, kindNames[got.kind], got.slot, got.version)
	}
	return nil
}

// pickSlots chooses up to BatchSize distinct slots of the worker.
func (s *soak) pickSlots(w *soakWorker, acked bool) []int {
	var out []int
	for range 4 * s.o.BatchSize {
		if len(out) == s.o.BatchSize {
			break
		}
		i := w.rng.IntN(len(w.slots))
		if acked && w.slots[i].acked == 0 {
			continue
		}
		dup := false
		for _, j := range out {
			dup = dup || j == i
		}
		if !dup {
			out = append(out, i)
		}
	}
	return out
}

func (s *soak) putBatch(ctx context.Context, w *soakWorker) error {
	idx := s.pickSlots(w, false)
	items := make([]client.Item, len(idx))
	for j, i := range idx {
		st := &w.slots[i]
		st.tried++
		slot := w.first + uint64(i)
		items[j] = client.Item{Key: soakKey(kindBatch, slot, st.tried), Data: s.value(w, kindBatch, slot, st.tried)}
		items[j].Data = append([]byte(nil), items[j].Data...)
	}
	c := w.node.Client()
	cctx, cancel := opCtx(ctx)
	defer cancel()
	t0 := time.Now()
	res, err := c.PutBatch(cctx, soakNS, items)
	s.done(ctx, "batch_put", t0, err)
	if err != nil {
		return err
	}
	var stored []block.Key
	for j, r := range res {
		if j >= len(idx) {
			break
		}
		switch r.Status {
		case "created", "exists":
			w.slots[idx[j]].acked = w.slots[idx[j]].tried
			s.putBytes.Add(int64(len(items[j].Data)))
			stored = append(stored, items[j].Key)
		default:
			s.mu.Lock()
			s.errs["batch_item_"+itemCode(r)]++
			s.errsByOp["batch_put_item:"+itemCode(r)]++
			s.mu.Unlock()
		}
	}
	if len(stored) > 0 && w.rng.IntN(4) == 0 {
		// Soft-pin a quarter of the batches for a while, as a context
		// cache client would: the SSD tier then copies pinned blocks
		// forward out of the segments it evicts, under the same reads.
		t0 := time.Now()
		_, err := c.CreateContext(cctx, client.ContextSpec{Namespace: soakNS, TTL: 10 * time.Second, Keys: stored})
		s.done(ctx, "context", t0, err)
		return err
	}
	return nil
}

func itemCode(r client.ItemResult) string {
	if r.Error != nil && r.Error.Code != "" {
		return r.Error.Code
	}
	return "error"
}

func (s *soak) getBatch(ctx context.Context, w *soakWorker) error {
	idx := s.pickSlots(w, true)
	if len(idx) == 0 {
		return s.putBatch(ctx, w)
	}
	keys := make([]block.Key, len(idx))
	for j, i := range idx {
		keys[j] = soakKey(kindBatch, w.first+uint64(i), w.slots[i].acked)
	}
	n := s.reader(w)
	c := n.Client()
	cctx, cancel := opCtx(ctx)
	defer cancel()
	t0 := time.Now()
	j := 0
	var corrupt []string
	err := c.GetBatch(cctx, soakNS, keys, func(f client.Frame, r io.Reader) error {
		if j >= len(idx) {
			return fmt.Errorf("bench: soak: more frames than keys")
		}
		i := idx[j]
		j++
		if f.Missing {
			s.misses.Add(1)
			return nil
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		s.hits.Add(1)
		slot, v := w.first+uint64(i), w.slots[i].acked
		got, perr := parseSoakValue(data)
		if f.Key != keys[j-1] || perr != nil || got.kind != kindBatch || got.slot != slot || got.version != v {
			corrupt = append(corrupt, fmt.Sprintf("batch slot %d v%d: frame key %s, %d bytes: %v (header %s slot %d v%d)", slot, v, f.Key, len(data), perr, kindNames[got.kind], got.slot, got.version))
		}
		return nil
	})
	if errors.Is(err, client.ErrChecksum) {
		corrupt = append(corrupt, fmt.Sprintf("batch get: %v", err))
		err = nil
	}
	s.done(ctx, "batch_get", t0, err)
	for _, m := range corrupt {
		s.corruptRead(n, "%s", m)
	}
	return err
}

func (s *soak) respConn(ctx context.Context, w *soakWorker) (*respConn, error) {
	if w.resp != nil {
		return w.resp, nil
	}
	rc, err := dialRESP(ctx, w.node.RESPAddr())
	if err != nil {
		return nil, err
	}
	w.resp = rc
	return rc, nil
}

// respDone drops the connection after an I/O error: its stream may be
// out of step.
func (w *soakWorker) respDone(err error) {
	var re *respError
	if err != nil && !errors.As(err, &re) && w.resp != nil {
		w.resp.Close()
		w.resp = nil
	}
}

func (s *soak) respSet(ctx context.Context, w *soakWorker, i int) error {
	st := &w.slots[i]
	slot := w.first + uint64(i)
	t0 := time.Now()
	rc, err := s.respConn(ctx, w)
	if err != nil {
		s.done(ctx, "resp_set", t0, err)
		return err
	}
	st.tried++
	v := st.tried
	life := w.node.Life.Load()
	data := s.value(w, kindRESP, slot, v)
	err = rc.Set(soakRESPKey(slot), data)
	s.done(ctx, "resp_set", t0, err)
	w.respDone(err)
	var re *respError
	switch {
	case err == nil:
		st.acked, st.ackedLife = v, life
		s.putBytes.Add(int64(len(data)))
	case errors.As(err, &re):
		if st.refused == nil {
			st.refused = map[uint64]bool{}
		}
		st.refused[v] = true
	}
	return err
}

// respGet reads a RESP key, which SET rewrites in place: the value must be
// the latest acknowledged version or a later one whose SET got no answer;
// after the node restarted, an older acknowledged one may come back (the
// store's deletes of replaced values are not synced) and is counted, not
// failed.
func (s *soak) respGet(ctx context.Context, w *soakWorker, i int) error {
	st := &w.slots[i]
	slot := w.first + uint64(i)
	t0 := time.Now()
	rc, err := s.respConn(ctx, w)
	if err != nil {
		s.done(ctx, "resp_get", t0, err)
		return err
	}
	data, err := rc.Get(soakRESPKey(slot))
	s.done(ctx, "resp_get", t0, err)
	w.respDone(err)
	if err != nil {
		return err
	}
	if data == nil {
		s.misses.Add(1)
		return nil
	}
	s.hits.Add(1)
	got, perr := parseSoakValue(data)
	switch {
	case perr != nil || got.kind != kindRESP || got.slot != slot:
		s.corruptRead(w.node, "resp slot %d: read %d bytes: %v (header %s slot %d v%d)", slot, len(data), perr, kindNames[got.kind], got.slot, got.version)
	case got.version > st.tried || st.refused[got.version]:
		s.corruptRead(w.node, "resp slot %d: read v%d, never stored (latest sent v%d)", slot, got.version, st.tried)
	case got.version < st.acked && w.node.Life.Load() > st.ackedLife:
		s.stale.Add(1)
	case got.version < st.acked:
		s.corruptRead(w.node, "resp slot %d: read v%d after v%d was acknowledged, no restart between", slot, got.version, st.acked)
	}
	return nil
}

// runDurable puts a block larger than the DRAM tier every DurableEvery, in
// turn on each node that is up.
func (s *soak) runDurable(ctx context.Context) {
	buf := make([]byte, s.o.durableBytes())
	t := time.NewTicker(s.o.DurableEvery)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := s.nodes[i%len(s.nodes)]; n.State.Load() == bench.NodeUp {
			s.durablePut(ctx, n, buf)
		}
	}
}

// durablePut puts a block larger than the DRAM tier on n: the hierarchy
// writes it to SSD, and the answer (tier "ssd") comes only after its record
// is synced (docs/durability.md). Each such acknowledgement is a write that
// must survive kill -9 for as long as its record is on disk.
func (s *soak) durablePut(ctx context.Context, n *bench.Node, buf []byte) {
	seq := s.durSeq.Add(1)
	fillSoakValue(buf, kindDurable, 0, seq)
	key := soakKey(kindDurable, 0, seq)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	res, err := n.Client().Put(cctx, soakNS, key, buf)
	s.done(ctx, "durable_put", t0, err)
	if err != nil {
		return
	}
	s.putBytes.Add(int64(len(buf)))
	if res.Tier != "ssd" {
		s.durInDRAM.Add(1)
		return
	}
	s.durAcked.Add(1)
	n.DurMu.Lock()
	n.Durable = append(n.Durable, bench.DurableWrite{Key: key, Seq: seq, Size: len(buf)})
	n.DurMu.Unlock()
}
