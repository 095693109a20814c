package resp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/tier"
)

// Server serves the Redis protocol over a tier.Hierarchy. It is safe for
// concurrent use; Serve may be called on several listeners.
type Server struct {
	opts  Options
	store *tier.Hierarchy
	ks    *keyspace
	gen   atomic.Uint64 // last generation handed out; see blockKey
	// tick counts the expiry loop's rounds (100 ms): the clock of inline
	// keys' last use, for eviction. evictShard is where the next eviction
	// sample is taken.
	tick       atomic.Uint32
	evictShard atomic.Uint64
	// share is the inline values' reservation in the top tier (share.go).
	share share
	start time.Time
	ids   atomic.Int64

	stats counters
	// setWarn and delWarn limit the logging of SETs and DELs that did not
	// reach every node of a cluster.
	setWarn, delWarn sometimes

	// delQ carries blocks to delete off the OnDrop path, which runs inside
	// a put's eviction and must not call back into the store (Delete takes
	// the store's key locks). Bounded: when it is full the block is left
	// to LRU, unreachable from the key table.
	delQ chan block.Key

	// ctx is cancelled when Shutdown gives up waiting: store calls of
	// connections still running then return.
	ctx    context.Context
	cancel context.CancelFunc
	// stopping is closed when Shutdown begins: it cuts short the delay of
	// a failed AUTH, which would otherwise hold Shutdown up.
	stopping chan struct{}
	bg       struct {
		stop chan struct{}
		wg   sync.WaitGroup
	}

	mu struct {
		sync.Mutex
		listeners map[net.Listener]struct{}
		conns     map[*conn]struct{}
		closing   bool
	}
	connWG sync.WaitGroup
	// loops serve connections when Options.EventLoop is set; nil
	// otherwise.
	loops *loops
}

type counters struct {
	conns, totalConns, rejected          atomic.Int64
	authFailures                         atomic.Int64
	commands, errors                     atomic.Int64
	hits, misses, expired, evicted, sets atomic.Int64
	remoteHits                           atomic.Int64 // hits served from another node
	corrupt                              atomic.Int64 // inline values that failed their checksum
	inlineHits                           atomic.Int64 // hits of inline values, which the store does not see
	netIn, netOut                        atomic.Int64
}

// Stats are the server's counters, for INFO and metrics. Counts are
// cumulative since NewServer.
type Stats struct {
	ConnectedClients  int64 `json:"connected_clients"`
	TotalConnections  int64 `json:"total_connections_received"`
	RejectedConns     int64 `json:"rejected_connections"`
	Commands          int64 `json:"total_commands_processed"`
	ErrorReplies      int64 `json:"total_error_replies"`
	AuthFailures      int64 `json:"acl_access_denied_auth"` // AUTHs refused: wrong token, or throttled
	KeyspaceHits      int64 `json:"keyspace_hits"`
	KeyspaceMisses    int64 `json:"keyspace_misses"`
	RemoteHits        int64 `json:"keyspace_remote_hits"` // of KeyspaceHits, served from another node
	InlineHits        int64 `json:"keyspace_inline_hits"` // of KeyspaceHits, inline values (not the store's)
	ExpiredKeys       int64 `json:"expired_keys"`
	EvictedKeys       int64 `json:"evicted_keys"` // dropped by the store, pair partners included
	Keys              int64 `json:"keys"`         // all namespaces
	KeysWithExpiry    int64 `json:"expires"`
	NetInputBytes     int64 `json:"total_net_input_bytes"`
	NetOutputBytes    int64 `json:"total_net_output_bytes"`
	UptimeSeconds     int64 `json:"uptime_in_seconds"`
	ExpiryHeapEntries int   `json:"expiry_heap_entries"`
	InlineKeys        int64 `json:"inline_keys"`     // keys whose value is inline
	InlineBytes       int64 `json:"inline_bytes"`    // what they cost, against InlineCapacity
	InlineCapacity    int64 `json:"inline_capacity"` // Options.InlineCapacity
	InlineReserved    int64 `json:"inline_reserved"` // of the DRAM tier, for them (0 when they sit beside it)
	CorruptValues     int64 `json:"corrupt_values"`  // inline values dropped for a bad checksum
}

// NewServer rebuilds the key table from the store's blocks and starts
// expiring keys. Serve it on listeners; Shutdown stops it.
func NewServer(opts Options) (*Server, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		opts:  opts,
		store: opts.Store,
		ks:    newKeyspace(),
		start: opts.Now(),
		delQ:  make(chan block.Key, 4096),
	}
	if ts := opts.Store.Tiers(); len(ts) > 0 {
		s.share.r, _ = ts[0].(reserver)
	}
	if opts.EventLoop {
		ls, err := newLoops(s, opts.EventLoops)
		if err != nil {
			return nil, err
		}
		s.loops = ls
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.stopping = make(chan struct{})
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*conn]struct{})
	// Listen for drops first: a block dropped while the table is rebuilt
	// is either seen gone by load or removed by the listener.
	s.store.OnDrop(s.dropped)
	maxGen := s.load()
	s.gen.Store(max(maxGen, uint64(opts.Now().UnixNano())))
	s.bg.stop = make(chan struct{})
	s.bg.wg.Go(s.expireLoop)
	s.bg.wg.Go(s.deleteLoop)
	if s.loops != nil {
		s.loops.start()
	}
	return s, nil
}

func (s *Server) nowMs() int64 { return s.opts.Now().UnixMilli() }

// load rebuilds the key table from the records of the blocks in the store
// and returns the highest generation found. Of two generations of one key
// (a restart between writing a new value and deleting the old) the higher
// wins; expired keys and LMCache metadata whose payload is gone are
// deleted.
func (s *Server) load() uint64 {
	var keys []block.Key
	for cursor := uint64(0); ; {
		cursor = s.store.Scan(cursor, 4096, func(k block.Key, _ index.Entry) bool {
			keys = append(keys, k)
			return true
		})
		if cursor == 0 {
			break
		}
	}
	type found struct {
		rec  record
		k    block.Key
		size int64
	}
	best := make(map[string]found)
	now := s.nowMs()
	maxGen := uint64(0)
	for _, k := range keys {
		info, _, err := s.store.Stat(k)
		if err != nil {
			continue
		}
		rec, err := parseRecord(info.Meta)
		if err != nil || blockKey(rec.ns, []byte(rec.name), rec.gen) != k {
			continue // not a Redis key's block
		}
		maxGen = max(maxGen, rec.gen)
		if rec.expireAt != 0 && rec.expireAt <= now {
			s.store.Delete(k)
			continue
		}
		ck := rec.ns + "\x00" + rec.name
		if prev, ok := best[ck]; ok {
			if prev.rec.gen > rec.gen {
				s.store.Delete(k)
				continue
			}
			s.store.Delete(prev.k)
		}
		best[ck] = found{rec, k, info.Size}
	}
	for _, f := range best {
		if f.rec.flags&flagPaired != 0 {
			pk, _ := partner(nil, &space{name: f.rec.ns}, []byte(f.rec.name))
			if _, ok := best[string(pk)]; !ok {
				s.store.Delete(f.k)
				continue
			}
		}
		e := newEntryOf(s.ks.space(f.rec.ns), nil, f.rec.name, nil, &blockRef{key: f.k, size: f.size})
		e.gen, e.paired = f.rec.gen, f.rec.flags&flagPaired != 0
		e.expireAt.Store(f.rec.expireAt)
		s.ks.swap(nil, e)
		if !s.store.Contains(f.k) {
			s.ks.swap(e, nil) // dropped since it was scanned
		}
	}
	return maxGen
}

// nextGen returns a generation no block of this store has used.
func (s *Server) nextGen() uint64 { return s.gen.Add(1) }

// dropped is the store's OnDrop listener: a block left the store by
// eviction. Its key goes, and so does the other half of an LMCache pair:
// evicting the payload and keeping its metadata would make a client find a
// chunk it cannot read.
func (s *Server) dropped(k block.Key) {
	e := s.ks.byBlock(k)
	if e == nil || !s.ks.swap(e, nil) {
		return
	}
	s.stats.evicted.Add(1)
	s.dropPartner(e)
}

// dropPartner removes the other half of an LMCache pair whose half e was
// evicted, if the two are tied. Its block, if any, is deleted by the
// deleter: this runs inside the store's eviction.
func (s *Server) dropPartner(e *entry) {
	pk, isPayload := partner(nil, e.space, []byte(e.name()))
	if pk == nil {
		return
	}
	p := s.ks.get(pk)
	if p == nil || !(isPayload && p.paired || !isPayload && e.paired) {
		return
	}
	if s.ks.swap(p, nil) {
		s.stats.evicted.Add(1)
		if k, ok := valueBlock(p); ok {
			select {
			case s.delQ <- k:
			default:
			}
		}
	}
}

func (s *Server) deleteLoop() {
	for {
		select {
		case k := <-s.delQ:
			s.store.Delete(k)
		case <-s.bg.stop:
			return
		}
	}
}

// expireLoop deletes keys whose deadline passed, every 100ms (Redis's
// default hz of 10), so memory held by expired keys is given back even if
// nobody reads them again.
func (s *Server) expireLoop() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-t.C:
		case <-s.bg.stop:
			return
		}
		s.tick.Add(1)
		for {
			due := s.ks.due(s.nowMs(), 1024)
			for _, e := range due {
				s.freeValue(e)
				s.stats.expired.Add(1)
			}
			if len(due) < 1024 {
				break
			}
		}
		if i%100 == 0 {
			s.ks.compactExpiry()
		}
		if s.share.r != nil {
			s.share.shrink(s.ks.inlineBytes.Load())
		}
	}
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	st := Stats{
		ConnectedClients: s.stats.conns.Load(),
		TotalConnections: s.stats.totalConns.Load(),
		RejectedConns:    s.stats.rejected.Load(),
		Commands:         s.stats.commands.Load(),
		ErrorReplies:     s.stats.errors.Load(),
		AuthFailures:     s.stats.authFailures.Load(),
		KeyspaceHits:     s.stats.hits.Load(),
		KeyspaceMisses:   s.stats.misses.Load(),
		RemoteHits:       s.stats.remoteHits.Load(),
		InlineHits:       s.stats.inlineHits.Load(),
		ExpiredKeys:      s.stats.expired.Load(),
		EvictedKeys:      s.stats.evicted.Load(),
		NetInputBytes:    s.stats.netIn.Load(),
		NetOutputBytes:   s.stats.netOut.Load(),
		UptimeSeconds:    int64(s.opts.Now().Sub(s.start) / time.Second),
	}
	for _, sp := range s.ks.allSpaces() {
		st.Keys += sp.keys.Load()
		st.KeysWithExpiry += sp.expires.Load()
	}
	s.ks.exp.Lock()
	st.ExpiryHeapEntries = s.ks.exp.h.Len()
	st.InlineKeys, st.InlineBytes = s.ks.inlineKeys.Load(), s.ks.inlineBytes.Load()
	st.InlineCapacity, st.CorruptValues = s.opts.InlineCapacity, s.stats.corrupt.Load()
	st.InlineReserved = s.share.reserved.Load()
	s.ks.exp.Unlock()
	return st
}

// Serve accepts connections on ln until Shutdown, and then returns nil.
// It closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.mu.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing() {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors and the like: wait and retry, as
			// net/http does, rather than spin or give up.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.opts.Logger.Warn("resp: accept failed; retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.bg.stop:
				return nil
			}
			continue
		}
		backoff = 0
		s.stats.totalConns.Add(1)
		c := s.newConn(nc)
		if !s.track(c) {
			s.stats.rejected.Add(1)
			nc.SetWriteDeadline(time.Now().Add(time.Second))
			io.WriteString(nc, "-ERR max number of clients reached\r\n")
			nc.Close()
			continue
		}
		if s.loops != nil && s.loops.add(c) {
			continue
		}
		go c.serve()
	}
}

func (s *Server) closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closing
}

// track registers c, unless the server is closing or full.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closing || len(s.mu.conns) >= s.opts.MaxConns {
		return false
	}
	s.mu.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.stats.conns.Add(1)
	return true
}

// clients returns the open connections, oldest first.
func (s *Server) clients() []*conn {
	s.mu.Lock()
	out := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		out = append(out, c)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *conn) int { return cmp.Compare(a.id, b.id) })
	return out
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
	s.stats.conns.Add(-1)
	s.connWG.Done()
}

// Shutdown stops accepting connections, closes idle ones, lets commands
// in progress finish and then closes their connections. If ctx ends first
// it closes every connection at once and returns ctx's error. Either way
// the server's background work has stopped when it returns. Commands a
// client pipelined behind the one in progress are not run.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	already := s.mu.closing
	s.mu.closing = true
	if !already {
		close(s.stopping)
	}
	for ln := range s.mu.listeners {
		ln.Close()
	}
	for c := range s.mu.conns {
		c.interrupt()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.connWG.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.cancel()
		s.mu.Lock()
		for c := range s.mu.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
	}
	if !already {
		// No command runs now: inline values become blocks, for the
		// store's Flush to keep across a restart.
		s.share.releaseAll()
		s.persistInline(ctx)
		close(s.bg.stop)
	}
	s.bg.wg.Wait()
	s.cancel()
	return err
}

// namespace returns the space of a tenant's keys.
func (s *Server) namespace(tenant string) (*space, error) {
	ns := s.opts.Namespace(tenant)
	if err := block.ValidateNamespace(ns); err != nil {
		return nil, err
	}
	if block.Tenant(ns) != tenant {
		return nil, fmt.Errorf("resp: namespace %q of tenant %q belongs to another tenant", ns, tenant)
	}
	return s.ks.space(ns), nil
}

// conn is one client connection, served by one goroutine.
type conn struct {
	s *Server
	// keyBuf is scratch for the table key of a SET's name (install).
	keyBuf []byte
	nc     net.Conn
	r      *reader
	out    []byte
	id     int64
	proto  int
	born   time.Time

	principal auth.Principal
	authed    bool
	sp        *space
	peer      netip.Addr // the client's address, the source AUTH failures count against
	authFails int        // failed AUTHs on this connection, never forgiven

	kbuf, pbuf []byte             // scratch for table keys
	tx         *tx                // MULTI: commands queued for EXEC
	watch      map[string]watched // WATCH: keys by table key
	watchNames []string           // and by name, in the order watched
	// watchRelease gives back the budget the watched keys hold.
	watchRelease []func()

	quit     bool      // QUIT: close after the reply
	errs     int       // error replies written
	busy     bool      // inside a command; only the conn's goroutine uses it
	rdl, wdl time.Time // when the read and write deadlines were last moved
	rdlSet   bool
	// lp is the connection's state in an event loop; nil on the
	// goroutine path. pre holds what the loop had read but not run when
	// the connection left it, for the goroutine to read first.
	lp  *loopState
	pre []byte
	// rs is the socket for raw reads and writes (rawio_linux.go).
	rs rawSock

	mu struct {
		sync.Mutex
		idle        bool // waiting for the next command
		interrupted bool // Shutdown began
		// What CLIENT LIST shows of the connection to others.
		name, libName, libVer string // CLIENT SETNAME, SETINFO
		cmd                   string // the last command
		active                time.Time
		user                  string // the tenant authenticated as
		admin                 bool   // authenticated with an admin token
		proto                 int
	}
}

func (s *Server) newConn(nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, id: s.ids.Add(1), proto: 2, born: time.Now(), peer: peerAddr(nc)}
	c.mu.active, c.mu.proto = c.born, 2
	c.r = newReader(connReader{c}, s.limits(false))
	if s.opts.Tokens == nil {
		c.principal, c.authed = auth.Open, true
		c.mu.user, c.mu.admin = auth.Open.Tenant, true
		c.sp, _ = s.namespace(auth.DefaultTenant) // validated by Options.Validate
	} else {
		c.r.lim = s.limits(true)
	}
	return c
}

func (s *Server) limits(unauthenticated bool) limits {
	if unauthenticated {
		return limits{maxArgs: unauthArgs, maxBulk: unauthBulk, maxRequest: s.opts.MaxRequestBytes, unauth: true}
	}
	return limits{maxArgs: s.opts.MaxArgs, maxBulk: s.opts.MaxBulkLen, maxRequest: s.opts.MaxRequestBytes}
}

// interrupt is Shutdown's: a connection waiting for its next command is
// woken up to close; one inside a command closes after it.
func (c *conn) interrupt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.interrupted = true
	if c.mu.idle {
		c.nc.SetReadDeadline(time.Now())
	}
}

// setIdle records whether the connection waits for a command and reports
// whether Shutdown has begun.
func (c *conn) setIdle(idle bool) (interrupted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.idle = idle
	return c.mu.interrupted
}

// connReader counts bytes in and bounds stalls inside a command.
type connReader struct{ c *conn }

func (r connReader) Read(p []byte) (int, error) {
	c := r.c
	if lp := c.lp; lp != nil {
		// The loop hands the parser only whole commands: running dry here
		// means its frame scan and the parser disagree.
		if len(lp.feed) == 0 {
			return 0, errLoopDry
		}
		n := copy(p, lp.feed)
		lp.feed = lp.feed[n:]
		return n, nil
	}
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	if c.busy && c.s.opts.StallTimeout > 0 {
		if now := time.Now(); now.Sub(c.rdl) >= c.s.opts.StallTimeout/4 {
			c.rdl = now
			c.rdlSet = true
			c.nc.SetReadDeadline(now.Add(c.s.opts.StallTimeout))
		}
	}
	n, err := c.readSock(p)
	c.s.stats.netIn.Add(int64(n))
	return n, err
}

func (c *conn) serve() {
	defer c.s.untrack(c)
	defer c.nc.Close()
	defer c.endTx()
	defer c.unwatch()
	for {
		c.busy = false
		if c.rdlSet {
			// Before going idle: an idle client is never timed out, and
			// Shutdown's wake-up deadline must not be overwritten.
			c.nc.SetReadDeadline(time.Time{})
			c.rdlSet, c.rdl = false, time.Time{}
		}
		if c.setIdle(true) {
			c.flush() // replies to the commands run so far
			return
		}
		n, err := c.r.begin()
		interrupted := c.setIdle(false)
		c.busy = true
		if err != nil {
			c.fail(err)
			return
		}
		if interrupted {
			return
		}
		if err := c.exec(n); err != nil {
			c.fail(err)
			return
		}
		if c.quit {
			c.flush()
			return
		}
		if c.r.br.Buffered() == 0 || len(c.out) >= flushAt {
			if err := c.flush(); err != nil {
				return
			}
		}
	}
}

// fail ends the connection on a read error: a protocol error is answered
// first, as Redis does; anything else (EOF, a reset, a timeout) just
// closes it.
func (c *conn) fail(err error) {
	var pe protoError
	if errors.As(err, &pe) {
		c.writeError("ERR " + pe.Error())
		c.flush()
		c.s.opts.Logger.Debug("resp: protocol error; closing", "conn", c.id, "remote", c.nc.RemoteAddr(), "err", err)
		return
	}
	c.flush()
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.s.opts.Logger.Debug("resp: connection closed", "conn", c.id, "remote", c.nc.RemoteAddr(), "err", err)
	}
}
