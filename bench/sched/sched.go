package sched

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/scheduler"
)

// Options configures one simulated cluster run by Sched.
type Options struct {
	// Trace to replay. Required.
	Trace *bench.Trace
	// Policy and Rejection are the scheduler's. Defaults: cache-global,
	// predicted (the zero values).
	Policy    scheduler.Policy
	Rejection scheduler.Rejection
	// Prefill and Decode are the instance counts. Default: 8 and 8.
	Prefill, Decode int
	// CacheTokens is each prefill instance's local cache (LRU). Default: 3M.
	CacheTokens int64
	// GlobalPool adds a store of this many tokens (LRU) that every
	// prefilled block is written to and any prefill instance can pull
	// from, as a pool of store nodes would. Default 0: none, the global
	// pool is the prefill instances' caches themselves.
	GlobalPool int64
	// Speed scales arrivals: 2 replays the trace twice as fast. Default 1.
	Speed float64
	// DecodeCapacity is each decode instance's KV capacity in tokens.
	// Default: scheduler.DefaultDecodeCapacity.
	DecodeCapacity int64
	// Sched are the scheduler's options; Policy, Rejection and BlockSize
	// are set from the fields above. Zero fields get the scheduler's
	// defaults, except DecodeTime (t_d), which defaults to the trace's mean
	// output length times the TBT SLO (the decode time at the SLO), and
	// DefaultOutputTokens, the trace's mean output length.
	Sched scheduler.Options
	// Requests limits the replay to the first this many requests; 0 is all.
	Requests int
	// SampleEvery is the interval of the load samples. Default: 5 s of
	// simulated time.
	SampleEvery time.Duration
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Prefill == 0 {
		o.Prefill = 8
	}
	if o.Decode == 0 {
		o.Decode = 8
	}
	if o.CacheTokens == 0 {
		o.CacheTokens = 3_000_000
	}
	if o.Speed == 0 {
		o.Speed = 1
	}
	if o.DecodeCapacity == 0 {
		o.DecodeCapacity = scheduler.DefaultDecodeCapacity
	}
	if o.SampleEvery == 0 {
		o.SampleEvery = 5 * time.Second
	}
	o.Sched.Policy, o.Sched.Rejection = o.Policy, o.Rejection
	o.Sched.BlockSize = bench.TraceBlockTokens
	if o.Trace != nil && o.Trace.Requests() > 0 {
		var out int64
		for i := range o.Trace.Requests() {
			out += int64(o.Trace.OutputTokens(i))
		}
		mean := max(int(out/int64(o.Trace.Requests())), 1)
		if o.Sched.DefaultOutputTokens == 0 {
			o.Sched.DefaultOutputTokens = mean
		}
		if o.Sched.DecodeTime == 0 {
			tbt := o.Sched.TBTSLO
			if tbt == 0 {
				tbt = 100 * time.Millisecond
			}
			o.Sched.DecodeTime = time.Duration(mean) * tbt
		}
	}
	o.Sched.EnsureDefaults()
}

// Validate reports every problem at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Trace == nil {
		errs = append(errs, fmt.Errorf("%w: no trace", bench.ErrOptions))
	}
	if o.Prefill < 1 || o.Decode < 1 || o.Prefill+o.Decode+1 > scheduler.MaxInstances {
		errs = append(errs, fmt.Errorf("%w: %d prefill and %d decode instances; want at least one of each and at most %d in all", bench.ErrOptions, o.Prefill, o.Decode, scheduler.MaxInstances-1))
	}
	if o.CacheTokens < bench.TraceBlockTokens {
		errs = append(errs, fmt.Errorf("%w: cache of %d tokens is less than one %d-token block", bench.ErrOptions, o.CacheTokens, bench.TraceBlockTokens))
	}
	if o.GlobalPool != 0 && o.GlobalPool < bench.TraceBlockTokens {
		errs = append(errs, fmt.Errorf("%w: global pool of %d tokens is less than one block", bench.ErrOptions, o.GlobalPool))
	}
	if !(o.Speed > 0) || math.IsInf(o.Speed, 0) {
		errs = append(errs, fmt.Errorf("%w: speed %v, want > 0", bench.ErrOptions, o.Speed))
	}
	if o.DecodeCapacity < 1 {
		errs = append(errs, fmt.Errorf("%w: decode capacity %d tokens", bench.ErrOptions, o.DecodeCapacity))
	}
	if o.Requests < 0 {
		errs = append(errs, fmt.Errorf("%w: %d requests", bench.ErrOptions, o.Requests))
	}
	if o.SampleEvery <= 0 {
		errs = append(errs, fmt.Errorf("%w: sample interval %v", bench.ErrOptions, o.SampleEvery))
	}
	if err := o.Sched.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// LoadSample is the cluster's load at one time: the mean over prefill
// instances of queued prefill time over the TTFT SLO, and the mean over
// decode instances of TBT over the TBT SLO. Above 1 a pool misses its SLO.
type LoadSample struct {
	At              time.Duration
	Prefill, Decode float64
}

// Result is one simulated run.
type Result struct {
	Policy    scheduler.Policy
	Rejection scheduler.Rejection
	Speed     float64

	Requests, Rejected, Effective int
	// TTFTs and TBTs of accepted requests, in seconds; TBT is the paper's:
	// the mean of a request's longest 10% of token intervals (requests
	// with at most one output token have none and are left out).
	TTFTs, TBTs []float64
	// Blocks and HitBlocks count accepted requests' blocks and those
	// reused from a cache (local, or pulled).
	Blocks, HitBlocks int64
	// Pulls and PulledTokens count migrations.
	Pulls        int
	PulledTokens int64
	// Loads are sampled from the first arrival to the last.
	Loads []LoadSample
	// Decisions counts Schedule calls; Wall is the run's real time.
	Decisions int
	Wall      time.Duration
}

// EffectiveCapacity is the share of requests that met both SLOs (the
// paper's effective request capacity at this load).
func (r *Result) EffectiveCapacity() float64 {
	return bench.Ratio(float64(r.Effective), float64(r.Requests))
}

// RejectedShare is the share of requests refused.
func (r *Result) RejectedShare() float64 {
	return bench.Ratio(float64(r.Rejected), float64(r.Requests))
}

// HitRate is the share of accepted requests' blocks reused.
func (r *Result) HitRate() float64 { return bench.Ratio(float64(r.HitBlocks), float64(r.Blocks)) }

// LoadStd returns the standard deviation over time of the prefill and the
// decode load: how much the pools swing.
func (r *Result) LoadStd() (prefill, decode float64) {
	p := make([]float64, len(r.Loads))
	d := make([]float64, len(r.Loads))
	for i, s := range r.Loads {
		p[i], d[i] = s.Prefill, s.Decode
	}
	return stddev(p), stddev(d)
}

func stddev(x []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	var mean float64
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	var ss float64
	for _, v := range x {
		ss += (v - mean) * (v - mean)
	}
	return math.Sqrt(ss / float64(len(x)))
}

// Simulate simulates a disaggregated cluster serving o.Trace under the
// scheduler core: see docs/benchmarks.md for the model. It is
// deterministic: the same options give the same result.
func Simulate(ctx context.Context, o Options) (*Result, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s, err := newSchedSim(o)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	s.res.Wall = time.Since(start)
	return &s.res, nil
}

// traceKey names a trace block for the scheduler: the trace's hash id in
// the first 8 bytes. Any injective mapping works; the scheduler only
// compares keys.
func traceKey(t *bench.Trace, id int32) block.Key {
	var k block.Key
	binary.LittleEndian.PutUint64(k[:], t.HashID(id))
	k[31] = 1 // not the zero key
	return k
}

type simEventKind uint8

const (
	evArrival simEventKind = iota
	evPrefillDone
	evDecodeStep
	evSample
)

type simEvent struct {
	at   time.Duration
	seq  uint64 // ties run in the order they were pushed
	kind simEventKind
	req  int // request index (arrival, prefill done)
	inst int // decode instance (step)
	gen  uint64
}

type eventQueue []simEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simReq is an accepted request's progress.
type simReq struct {
	idx        int
	id         string
	arrival    time.Duration
	input      int64
	output     int
	prefillEnd time.Duration
	prefill    int
	decode     int
	generated  int   // output tokens so far (the first comes from prefill)
	kv         int64 // KV tokens it holds while decoding
	// runs are its token intervals: count intervals of dur each.
	runs []tokenRun
}

type tokenRun struct {
	dur   time.Duration
	count int
}

// tbt is the paper's TBT: the mean of the longest 10% of the intervals.
func (r *simReq) tbt() float64 {
	total := 0
	for _, run := range r.runs {
		total += run.count
	}
	if total == 0 {
		return 0
	}
	k := (total + 9) / 10
	slices.SortFunc(r.runs, func(a, b tokenRun) int { return int(b.dur - a.dur) })
	var sum time.Duration
	left := k
	for _, run := range r.runs {
		n := min(run.count, left)
		sum += time.Duration(n) * run.dur
		left -= n
		if left == 0 {
			break
		}
	}
	return sum.Seconds() / float64(k)
}

func (r *simReq) addRun(d time.Duration, n int) {
	if n <= 0 {
		return
	}
	if l := len(r.runs); l > 0 && r.runs[l-1].dur == d {
		r.runs[l-1].count += n
		return
	}
	r.runs = append(r.runs, tokenRun{d, n})
}

type simPrefill struct {
	id    string
	free  time.Duration // when its queued work is done
	cache *bench.PolicyCache
}

// simDecode is a decode instance running continuous batching. It runs
// iterations in runs of equal length: between two changes of its batch
// every iteration takes the same time, so a run of m iterations is one
// event instead of m.
type simDecode struct {
	id       string
	active   []*simReq
	waiting  []*simReq // prefilled, joining at the next iteration
	running  bool
	runStart time.Duration
	iter     time.Duration // iteration time of the current run
	iters    int           // iterations in the current run
	gen      uint64        // invalidates superseded step events
}

type schedSim struct {
	o        Options
	t        *bench.Trace
	core     *scheduler.Core
	keys     []block.Key // by dense block id
	prefills []*simPrefill
	decodes  []*simDecode
	pool     *bench.PolicyCache
	events   eventQueue
	seq      uint64
	reqs     []*simReq // by request index; nil until accepted
	res      Result
	n        int // requests replayed
	lastArr  time.Duration
}

const poolID = "pool"

func newSchedSim(o Options) (*schedSim, error) {
	core, err := scheduler.NewCore(o.Sched)
	if err != nil {
		return nil, err
	}
	s := &schedSim{o: o, t: o.Trace, core: core}
	s.res.Policy, s.res.Rejection, s.res.Speed = o.Policy, o.Rejection, o.Speed
	s.keys = make([]block.Key, s.t.Blocks())
	for id := range s.keys {
		s.keys[id] = traceKey(s.t, int32(id))
	}
	for i := range o.Prefill {
		id := "p" + strconv.Itoa(i)
		c, err := bench.NewPolicyCache("lru", o.CacheTokens/bench.TraceBlockTokens, s.t.Blocks())
		if err != nil {
			return nil, err
		}
		if err := core.AddInstance(scheduler.Instance{ID: id, Role: scheduler.RolePrefill, Capacity: o.CacheTokens}, 0); err != nil {
			return nil, err
		}
		s.prefills = append(s.prefills, &simPrefill{id: id, cache: c})
	}
	for i := range o.Decode {
		id := "d" + strconv.Itoa(i)
		if err := core.AddInstance(scheduler.Instance{ID: id, Role: scheduler.RoleDecode, Capacity: o.DecodeCapacity}, 0); err != nil {
			return nil, err
		}
		s.decodes = append(s.decodes, &simDecode{id: id})
	}
	if o.GlobalPool > 0 {
		c, err := bench.NewPolicyCache("lru", o.GlobalPool/bench.TraceBlockTokens, s.t.Blocks())
		if err != nil {
			return nil, err
		}
		if err := core.AddInstance(scheduler.Instance{ID: poolID, Role: scheduler.RoleStore, Capacity: o.GlobalPool}, 0); err != nil {
			return nil, err
		}
		s.pool = c
	}
	s.n = s.t.Requests()
	if o.Requests > 0 {
		s.n = min(s.n, o.Requests)
	}
	s.reqs = make([]*simReq, s.n)
	return s, nil
}

func (s *schedSim) push(e simEvent) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.events, e)
}

func (s *schedSim) arrival(i int) time.Duration {
	return time.Duration(float64(s.t.Arrival(i)) / s.o.Speed)
}

func (s *schedSim) run(ctx context.Context) error {
	if s.n == 0 {
		return nil
	}
	// Arrivals are pushed one at a time, each pushing the next, so the
	// queue holds only in-flight work.
	s.push(simEvent{at: s.arrival(0), kind: evArrival, req: 0})
	s.lastArr = s.arrival(s.n - 1)
	s.push(simEvent{at: s.arrival(0), kind: evSample})
	for steps := 0; s.events.Len() > 0; steps++ {
		if steps&0xfff == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		e := heap.Pop(&s.events).(simEvent)
		var err error
		switch e.kind {
		case evArrival:
			if e.req+1 < s.n {
				s.push(simEvent{at: s.arrival(e.req + 1), kind: evArrival, req: e.req + 1})
			}
			err = s.onArrival(e.req, e.at)
		case evPrefillDone:
			err = s.onPrefillDone(s.reqs[e.req], e.at)
		case evDecodeStep:
			if d := s.decodes[e.inst]; e.gen == d.gen {
				err = s.onDecodeStep(d, e.at)
			}
		case evSample:
			s.sample(e.at)
			if next := e.at + s.o.SampleEvery; next <= s.lastArr {
				s.push(simEvent{at: next, kind: evSample})
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *schedSim) onArrival(i int, now time.Duration) error {
	ids, n := s.t.Request(i)
	keys := make([]block.Key, len(ids))
	for j, id := range ids {
		keys[j] = s.keys[id]
	}
	id := strconv.Itoa(i)
	d, err := s.core.Schedule(scheduler.Request{ID: id, Keys: keys, InputTokens: int(n)}, now)
	s.res.Decisions++
	s.res.Requests++
	if err != nil {
		return fmt.Errorf("bench: request %d: %w", i, err)
	}
	if !d.Accepted() {
		s.res.Rejected++
		return nil
	}
	pi := s.prefillIndex(d.Prefill)
	p := s.prefills[pi]
	r := &simReq{idx: i, id: id, arrival: now, input: n, output: s.t.OutputTokens(i), prefill: pi, decode: s.decodeIndex(d.Decode)}
	s.reqs[i] = r
	// The instance works through its queue in order; a pull occupies it
	// as long as the estimate says, as the scheduler assumed.
	start := max(p.free, now)
	p.free = start + d.Estimates.Transfer + s.o.Sched.Prefill.Estimate(int(n), d.PrefixTokens)
	r.prefillEnd = p.free
	s.res.Blocks += int64(len(ids))
	s.res.HitBlocks += int64((d.PrefixTokens + bench.TraceBlockTokens - 1) / bench.TraceBlockTokens)
	if d.Pull != nil {
		s.res.Pulls++
		s.res.PulledTokens += int64(d.Pull.Tokens)
	}
	s.push(simEvent{at: r.prefillEnd, kind: evPrefillDone, req: i})
	return nil
}

func (s *schedSim) prefillIndex(id string) int {
	i, err := strconv.Atoi(id[1:])
	if err != nil || id[0] != 'p' || i >= len(s.prefills) {
		panic("BUG: bench: scheduler chose unknown prefill instance " + id)
	}
	return i
}

func (s *schedSim) decodeIndex(id string) int {
	i, err := strconv.Atoi(id[1:])
	if err != nil || id[0] != 'd' || i >= len(s.decodes) {
		panic("BUG: bench: scheduler chose unknown decode instance " + id)
	}
	return i
}

// cacheBlocks inserts a prefilled request's blocks into c (the prefill
// instance's cache or the pool) and reports every change to the core.
func (s *schedSim) cacheBlocks(ids []int32, c *bench.PolicyCache, inst string) error {
	parent := bench.NoParent
	for _, id := range ids {
		added := !c.Contains(id)
		err := c.TouchEvicting(id, parent, func(victim int32) error {
			return s.core.RemoveBlock(inst, s.keys[victim])
		})
		if err != nil {
			return err
		}
		if added {
			if err := s.core.AddBlock(inst, s.keys[id]); err != nil {
				return err
			}
		}
		parent = id
	}
	return nil
}

func (s *schedSim) onPrefillDone(r *simReq, now time.Duration) error {
	ids, _ := s.t.Request(r.idx)
	p := s.prefills[r.prefill]
	if err := s.cacheBlocks(ids, p.cache, p.id); err != nil {
		return err
	}
	if s.pool != nil {
		if err := s.cacheBlocks(ids, s.pool, poolID); err != nil {
			return err
		}
	}
	s.res.TTFTs = append(s.res.TTFTs, (now - r.arrival).Seconds())
	if err := s.core.PrefillDone(r.id, now); err != nil {
		return err
	}
	r.generated = 1 // the prefill emits the first token
	if r.output <= 1 {
		s.finish(r, now)
		return s.core.Finished(r.id, now)
	}
	r.kv = r.input + 1
	d := s.decodes[r.decode]
	d.waiting = append(d.waiting, r)
	s.kick(r.decode, now)
	return nil
}

func (s *schedSim) finish(r *simReq, now time.Duration) {
	tbt := r.tbt()
	if r.output > 1 {
		s.res.TBTs = append(s.res.TBTs, tbt)
	}
	ttft := (r.prefillEnd - r.arrival).Seconds()
	if ttft <= s.o.Sched.TTFTSLO.Seconds() && tbt <= s.o.Sched.TBTSLO.Seconds() {
		s.res.Effective++
	}
	r.runs = nil
	s.reqs[r.idx] = nil
}

// kick makes decode instance i notice waiting requests: an idle instance
// starts a run now; a busy one cuts its run short at the next iteration
// boundary so they join there.
func (s *schedSim) kick(i int, now time.Duration) {
	d := s.decodes[i]
	if !d.running {
		s.startRun(i, now)
		return
	}
	done := int((now - d.runStart) / d.iter) // iterations complete by now
	if done+1 < d.iters {
		d.iters = done + 1
		d.gen++
		s.push(simEvent{at: d.runStart + time.Duration(d.iters)*d.iter, kind: evDecodeStep, inst: i, gen: d.gen})
	}
}

// startRun admits waiting requests and starts a run of iterations that
// lasts until the first request in the batch finishes.
func (s *schedSim) startRun(i int, now time.Duration) {
	d := s.decodes[i]
	// The interval before a joiner's first decoded token includes waiting
	// for this boundary; it is recorded when the run ends.
	d.active = append(d.active, d.waiting...)
	d.waiting = d.waiting[:0]
	if len(d.active) == 0 {
		d.running = false
		return
	}
	var kv int64
	left := math.MaxInt
	for _, r := range d.active {
		kv += r.kv
		left = min(left, r.output-r.generated)
	}
	d.iter = s.iterTime(len(d.active), kv)
	d.running, d.runStart, d.iters = true, now, left
	d.gen++
	s.push(simEvent{at: now + time.Duration(left)*d.iter, kind: evDecodeStep, inst: i, gen: d.gen})
}

func (s *schedSim) iterTime(batch int, kv int64) time.Duration {
	t := s.o.Sched.Decode.Estimate(batch, kv)
	return max(time.Duration(float64(t)*scheduler.Slowdown(kv, s.o.DecodeCapacity)), time.Microsecond)
}

func (s *schedSim) onDecodeStep(d *simDecode, now time.Duration) error {
	i := s.decodeIndex(d.id)
	m := d.iters
	kept := d.active[:0]
	for _, r := range d.active {
		if r.generated == 1 && len(r.runs) == 0 {
			// First decoded token: from the prefill's token to the end of
			// this run's first iteration.
			r.addRun(d.runStart+d.iter-r.prefillEnd, 1)
			r.addRun(d.iter, m-1)
		} else {
			r.addRun(d.iter, m)
		}
		r.generated += m
		r.kv += int64(m)
		if r.generated >= r.output {
			s.finish(r, now)
			if err := s.core.Finished(r.id, now); err != nil {
				return err
			}
			continue
		}
		kept = append(kept, r)
	}
	clear(d.active[len(kept):])
	d.active = kept
	d.running = false
	s.startRun(i, now)
	return nil
}

func (s *schedSim) sample(now time.Duration) {
	var pl, dl float64
	for _, p := range s.prefills {
		pl += max(p.free-now, 0).Seconds() / s.o.Sched.TTFTSLO.Seconds()
	}
	for _, d := range s.decodes {
		b := len(d.active) + len(d.waiting)
		var kv int64
		for _, r := range d.active {
			kv += r.kv
		}
		for _, r := range d.waiting {
			kv += r.kv
		}
		dl += s.iterTime(b, kv).Seconds() / s.o.Sched.TBTSLO.Seconds() * float64(min(b, 1))
	}
	s.res.Loads = append(s.res.Loads, LoadSample{At: now, Prefill: pl / float64(len(s.prefills)), Decode: dl / float64(len(s.decodes))})
}
