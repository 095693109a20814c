package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/expiry"
	"github.com/yuebing/yuebing/tier"
)

// contextStore is the context cache: named sets of blocks soft-pinned until
// a deadline. A block's pin is the latest deadline among the live contexts
// of its namespace that list it; it is lowered or lifted when a context is
// shortened or deleted, and lapses by itself in the tier when the last one
// expires, so expiry needs no call into the store.
//
// Contexts are persisted to a JSON file rewritten atomically (write, fsync,
// rename) at most once per persistInterval and on Close; on start they are
// read back and their pins applied again, since DRAM pins do not survive a
// restart. It is safe for concurrent use.
type contextStore struct {
	store *tier.Hierarchy
	opts  contextsOptions

	// applyMu serializes changes with the pin calls that follow them, so
	// pins reach the store in the order the changes were made. Pins are
	// applied outside mu: they may write to the SSD tier's index.
	applyMu sync.Mutex
	mu      struct {
		sync.Mutex
		byID   map[string]*contextRecord
		refs   map[block.Key][]*contextRecord
		expiry expiry.Heap[string]
		dirty  bool
	}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type contextsOptions struct {
	Store  *tier.Hierarchy
	Path   string // "" keeps contexts in memory only
	Max    int
	Now    func() time.Time
	Logger *slog.Logger
}

// contextRecord is one context. Records are immutable once published in
// byID except ExpiresAt, which is guarded by the store's mu.
type contextRecord struct {
	ID        string      `json:"id"`
	Namespace string      `json:"namespace"`
	Name      string      `json:"name,omitempty"`
	Keys      []block.Key `json:"keys"`
	CreatedAt time.Time   `json:"created_at"`
	ExpiresAt time.Time   `json:"expires_at"`
}

// persistInterval bounds how often the contexts file is rewritten: a
// busy node creates contexts per request, the file holds them all.
const persistInterval = time.Second

// contextsFileVersion is the layout of the contexts file.
const contextsFileVersion = 1

type contextsFile struct {
	Version  int              `json:"version"`
	Contexts []*contextRecord `json:"contexts"`
}

func openContexts(opts contextsOptions) (*contextStore, error) {
	s := &contextStore{store: opts.Store, opts: opts}
	s.mu.byID = map[string]*contextRecord{}
	s.mu.refs = map[block.Key][]*contextRecord{}
	if opts.Path != "" {
		recs, err := loadContexts(opts.Path, opts.Logger)
		if err != nil {
			return nil, err
		}
		now := opts.Now()
		pins := map[block.Key]*contextRecord{}
		for _, r := range recs {
			if !r.ExpiresAt.After(now) || len(s.mu.byID) >= opts.Max {
				continue
			}
			s.addLocked(r)
			for _, k := range r.Keys {
				pins[k] = r
			}
		}
		for k, r := range pins {
			s.applyPin(k, r.Namespace, s.pinForLocked(k, r.Namespace))
		}
		if n := len(s.mu.byID); n > 0 {
			opts.Logger.Info("server: contexts restored", "contexts", n, "blocks", len(pins))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Go(func() { s.loop(ctx) })
	return s, nil
}

func loadContexts(path string, log *slog.Logger) ([]*contextRecord, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("server: reading contexts: %w", err)
	}
	var f contextsFile
	if err := json.Unmarshal(data, &f); err != nil || f.Version != contextsFileVersion {
		// Written atomically, so this is damage from outside; contexts
		// are soft state, and a node that will not start is worse.
		bad := path + ".bad"
		log.Error("server: contexts file unreadable; moved aside, starting with none", "file", path, "moved_to", bad, "err", err, "version", f.Version)
		if err := os.Rename(path, bad); err != nil {
			return nil, fmt.Errorf("server: moving aside unreadable contexts file: %w", err)
		}
		return nil, nil
	}
	for _, r := range f.Contexts {
		if r == nil || validContextID(r.ID) != nil || block.ValidateNamespace(r.Namespace) != nil {
			return nil, fmt.Errorf("server: contexts file %s holds an invalid record", path)
		}
	}
	return f.Contexts, nil
}

func newContextID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validContextID checks the form of a context id: 32 lowercase hex digits.
func validContextID(id string) error {
	if len(id) != 32 {
		return fmt.Errorf("%w: context id %q: want 32 hex digits", ErrBadRequest, id)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("%w: context id %q: want 32 lowercase hex digits", ErrBadRequest, id)
		}
	}
	return nil
}

func (s *contextStore) addLocked(r *contextRecord) {
	s.mu.byID[r.ID] = r
	for _, k := range uniqueKeys(r.Keys) {
		s.mu.refs[k] = append(s.mu.refs[k], r)
	}
	s.mu.expiry.Push(r.ExpiresAt.UnixNano(), r.ID)
	s.mu.dirty = true
}

func (s *contextStore) removeLocked(r *contextRecord) {
	delete(s.mu.byID, r.ID)
	for _, k := range uniqueKeys(r.Keys) {
		refs := slices.DeleteFunc(s.mu.refs[k], func(x *contextRecord) bool { return x == r })
		if len(refs) == 0 {
			delete(s.mu.refs, k)
		} else {
			s.mu.refs[k] = refs
		}
	}
	s.mu.dirty = true
}

func uniqueKeys(keys []block.Key) []block.Key {
	seen := make(map[block.Key]struct{}, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out
}

// pinForLocked is the pin a block of namespace ns should have: the latest
// deadline of the live contexts of ns listing it, zero if none.
func (s *contextStore) pinForLocked(k block.Key, ns string) time.Time {
	var until time.Time
	now := s.opts.Now()
	for _, r := range s.mu.refs[k] {
		if r.Namespace == ns && r.ExpiresAt.After(now) && r.ExpiresAt.After(until) {
			until = r.ExpiresAt
		}
	}
	return until
}

// pinFor is the pin a block being put into namespace ns gets at commit, so
// that a context created before its blocks arrive still holds them.
func (s *contextStore) pinFor(k block.Key, ns string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mu.refs) == 0 {
		return time.Time{}
	}
	return s.pinForLocked(k, ns)
}

// applyPin pins a block of namespace ns until the given time (zero
// unpins). Only blocks recorded under ns are pinned: a context cannot pin,
// or learn about, another namespace's blocks. Missing blocks are skipped.
func (s *contextStore) applyPin(k block.Key, ns string, until time.Time) error {
	if _, ok := recordedIn(s.store, k, ns); !ok {
		return nil
	}
	if err := s.store.Pin(k, until); err != nil && !errors.Is(err, tier.ErrNotFound) {
		return err
	}
	return nil
}

// recordedIn returns the fastest tier holding k if the block is recorded
// under namespace ns.
func recordedIn(store *tier.Hierarchy, k block.Key, ns string) (int, bool) {
	info, level, err := store.Stat(k)
	if err != nil {
		return -1, false
	}
	m, ok := decodeMeta(info.Meta)
	return level, ok && m.Namespace == ns
}

// create adds a context and pins its blocks. If the tiers cannot take the
// pins (their pinned-bytes limits), the context is removed again and the
// error wraps tier.ErrNoSpace.
func (s *contextStore) create(ns, name string, keys []block.Key, ttl time.Duration) (contextRecord, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	now := s.opts.Now()
	r := &contextRecord{ID: newContextID(), Namespace: ns, Name: name, Keys: keys, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	s.mu.Lock()
	s.expireLocked(now)
	if len(s.mu.byID) >= s.opts.Max {
		s.mu.Unlock()
		return contextRecord{}, fmt.Errorf("%w: %d live contexts, the limit is %d (contexts.max_contexts)", ErrOverloaded, s.opts.Max, s.opts.Max)
	}
	s.addLocked(r)
	pins := s.pinsLocked(r)
	out := *r
	s.mu.Unlock()
	for _, k := range uniqueKeys(keys) {
		if err := s.applyPin(k, ns, pins[k]); err != nil {
			s.mu.Lock()
			s.removeLocked(r)
			pins = s.pinsLocked(r)
			s.mu.Unlock()
			for _, k := range uniqueKeys(keys) {
				s.applyPin(k, ns, pins[k])
			}
			return contextRecord{}, fmt.Errorf("pinning the context's blocks: %w", err)
		}
	}
	return out, nil
}

func (s *contextStore) pinsLocked(r *contextRecord) map[block.Key]time.Time {
	pins := make(map[block.Key]time.Time, len(r.Keys))
	for _, k := range r.Keys {
		pins[k] = s.pinForLocked(k, r.Namespace)
	}
	return pins
}

// get returns a live context.
func (s *contextStore) get(id string) (contextRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.mu.byID[id]
	if !ok || !r.ExpiresAt.After(s.opts.Now()) {
		return contextRecord{}, false
	}
	return *r, true
}

// extend sets a live context's deadline to now+ttl and re-pins its blocks.
func (s *contextStore) extend(id string, ttl time.Duration) (contextRecord, bool, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	now := s.opts.Now()
	s.mu.Lock()
	r, ok := s.mu.byID[id]
	if !ok || !r.ExpiresAt.After(now) {
		s.mu.Unlock()
		return contextRecord{}, false, nil
	}
	r.ExpiresAt = now.Add(ttl)
	s.mu.expiry.Push(r.ExpiresAt.UnixNano(), r.ID)
	s.mu.dirty = true
	pins := s.pinsLocked(r)
	out := *r
	s.mu.Unlock()
	var errs []error
	for k, until := range pins {
		errs = append(errs, s.applyPin(k, r.Namespace, until))
	}
	return out, true, errors.Join(errs...)
}

// remove deletes a context and lowers or lifts its blocks' pins.
func (s *contextStore) remove(id string) (contextRecord, bool) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	r, ok := s.mu.byID[id]
	if !ok || !r.ExpiresAt.After(s.opts.Now()) {
		s.mu.Unlock()
		return contextRecord{}, false
	}
	s.removeLocked(r)
	pins := s.pinsLocked(r)
	out := *r
	s.mu.Unlock()
	for k, until := range pins {
		s.applyPin(k, r.Namespace, until)
	}
	return out, true
}

// list returns up to limit live contexts with ids after cursor, in id
// order, that visible accepts, and the cursor of the next page ("" at the
// end).
func (s *contextStore) list(visible func(ns string) bool, cursor string, limit int) ([]contextRecord, string) {
	s.mu.Lock()
	now := s.opts.Now()
	ids := make([]string, 0, len(s.mu.byID))
	for id, r := range s.mu.byID {
		if id > cursor && r.ExpiresAt.After(now) && visible(r.Namespace) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	next := ""
	if len(ids) > limit {
		ids = ids[:limit]
		next = ids[limit-1]
	}
	out := make([]contextRecord, len(ids))
	for i, id := range ids {
		out[i] = *s.mu.byID[id]
	}
	s.mu.Unlock()
	return out, next
}

// len returns the number of live contexts.
func (s *contextStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.byID)
}

// expireLocked forgets contexts whose deadline has passed. Their pins
// lapse in the tiers at the same moment, so nothing is unpinned here.
func (s *contextStore) expireLocked(now time.Time) {
	for {
		id, at, ok := s.mu.expiry.PopDue(now.UnixNano())
		if !ok {
			return
		}
		if r := s.mu.byID[id]; r != nil && r.ExpiresAt.UnixNano() == at {
			s.removeLocked(r)
		}
	}
}

// loop expires contexts and persists changes, at most once per
// persistInterval.
func (s *contextStore) loop(ctx context.Context) {
	t := time.NewTicker(persistInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		s.expireLocked(s.opts.Now())
		s.mu.Unlock()
		if err := s.persist(); err != nil {
			s.opts.Logger.Error("server: persisting contexts", "err", err)
		}
	}
}

// persist writes the contexts file if anything changed since the last
// write.
func (s *contextStore) persist() error {
	if s.opts.Path == "" {
		return nil
	}
	s.mu.Lock()
	if !s.mu.dirty {
		s.mu.Unlock()
		return nil
	}
	f := contextsFile{Version: contextsFileVersion, Contexts: make([]*contextRecord, 0, len(s.mu.byID))}
	for _, r := range s.mu.byID {
		c := *r
		f.Contexts = append(f.Contexts, &c)
	}
	s.mu.dirty = false
	s.mu.Unlock()
	slices.SortFunc(f.Contexts, func(a, b *contextRecord) int { return a.CreatedAt.Compare(b.CreatedAt) })
	data, err := json.Marshal(f)
	if err == nil {
		err = writeFileAtomic(s.opts.Path, data)
	}
	if err != nil {
		s.mu.Lock()
		s.mu.dirty = true // try again next time
		s.mu.Unlock()
	}
	return err
}

// Close stops the background loop and persists the contexts.
func (s *contextStore) Close() error {
	s.cancel()
	s.wg.Wait()
	return s.persist()
}

// writeFileAtomic replaces path with data so that a crash leaves either
// the old file or the new one, never a torn one.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
