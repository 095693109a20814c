package scheduler

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/yuebing/yuebing/block"
)

// Request is a request to place.
type Request struct {
	// ID names the request in later events (PrefillDone, Finished). Empty
	// means the core assigns one. It must not be in flight already.
	ID string
	// Keys are the chained keys of the prompt's blocks, first to last.
	Keys []block.Key
	// InputTokens is the prompt length n. Zero means len(Keys)*BlockSize.
	// It may exceed that by less than a block (a trailing partial block).
	InputTokens int
	// OutputTokens is the expected output length; zero means the core's
	// DefaultOutputTokens. It sizes the request's KV in a decode batch.
	OutputTokens int
	// Pool are store instances' prefixes of Keys as the cluster's index
	// knows them now; they add to what the instances reported. The caller
	// asks the index per request, so the core keeps no copy to go stale.
	Pool []PoolHit
	// Held are prefill instances' cached prefixes of Keys as a caller that
	// keeps their block sets itself matched them (a router following
	// engines' events under locks of its own); each counts when longer than
	// what the instance reported through UpdateBlocks. Entries naming an
	// instance no longer registered as a prefill instance are ignored: it
	// may have left between the caller's match and this call.
	Held []HeldPrefix
	// Exclude are instances not to place this request on (a retry's, after
	// the instance failed it); unknown ids are ignored. With every prefill
	// instance excluded, Schedule fails with ErrNoPrefill.
	Exclude []string
}

// HeldPrefix is a prefill instance's cached prefix of a request's chain.
type HeldPrefix struct {
	// Instance is the id of a prefill instance.
	Instance string
	// Blocks is the length of the prefix of Request.Keys it holds.
	Blocks int
}

// Source is where a pulled prefix sits; it sets the transfer bandwidth.
type Source uint8

// Sources of a pulled prefix.
const (
	// SourceHBM is another engine's device memory.
	SourceHBM Source = iota
	// SourceDRAM is a pool node's DRAM on the engine's host (or one whose
	// locality is unknown).
	SourceDRAM
	// SourceSSD is a pool node's SSD.
	SourceSSD
	// SourceRemote is a pool node on another host, across the network.
	SourceRemote
	// NumSources counts the sources.
	NumSources
)

var sourceNames = [...]string{SourceHBM: "hbm", SourceDRAM: "dram", SourceSSD: "ssd", SourceRemote: "remote"}

func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// PoolHit is a store instance's cached prefix of a request's chain.
type PoolHit struct {
	// Instance is the id of a registered store instance.
	Instance string
	// Blocks is the length of the prefix of Request.Keys it holds.
	Blocks int
	// Source is where the prefix's slowest block sits.
	Source Source
}

// Reason says why a request was rejected.
type Reason string

// Reasons for rejection.
const (
	ReasonTTFT Reason = "ttft_slo" // the best TTFT exceeds the TTFT SLO
	ReasonTBT  Reason = "tbt_slo"  // the decode batch would exceed the TBT SLO
)

// Estimates are the figures a decision was made on.
type Estimates struct {
	Transfer time.Duration `json:"transfer"` // pulling the missing prefix
	Queue    time.Duration `json:"queue"`    // prefill work queued ahead
	Prefill  time.Duration `json:"prefill"`  // this request's prefill
	TTFT     time.Duration `json:"ttft"`     // Transfer + Queue + Prefill
	// TBT is the chosen decode instance's time between tokens that the
	// rejection check used: the current batch with this request for
	// none and early, the predicted one for predicted.
	TBT time.Duration `json:"tbt"`
}

// Pull is a migration plan: To fetches Keys (the blocks it is missing of
// the prefix) from From before the prefill, and keeps them, which is how
// hot blocks get replicated.
type Pull struct {
	From, To string
	FromAddr string
	Keys     []block.Key // aliases Request.Keys
	Tokens   int
}

// Decision is the outcome of Schedule.
type Decision struct {
	RequestID string
	// Prefill and Decode are the chosen instance ids, with their addresses.
	// Decode is empty when no decode instance is registered.
	Prefill, Decode         string
	PrefillAddr, DecodeAddr string
	// PrefixTokens is the cached prefix the prefill reuses, after any pull.
	// LocalPrefixTokens is what Prefill held itself; BestPrefixTokens the
	// longest prefix held anywhere, by BestHolder.
	PrefixTokens, LocalPrefixTokens, BestPrefixTokens int
	BestHolder                                        string
	// Pull is set when the prefill instance pulls a remote prefix.
	Pull *Pull
	// PullSource is where the pulled prefix sat (with Pull set).
	PullSource Source
	Estimates  Estimates
	// Rejected is set when the request is refused; nothing was scheduled.
	Rejected Reason
}

// Accepted reports whether the request was scheduled.
func (d *Decision) Accepted() bool { return d.Rejected == "" }

// Schedule places req at now: it picks the prefill instance by the
// configured policy (Algorithm 1 for PolicyCacheGlobal), the decode
// instance with the smallest TBT given the requests already sent to it,
// and applies the overload policy. An accepted request is queued on its
// prefill instance and counted in its decode batch; a rejected one changes
// nothing. Errors are for requests that cannot be placed at all (invalid,
// no prefill instance), never for load.
func (c *Core) Schedule(req Request, now time.Duration) (Decision, error) {
	bs := c.opts.BlockSize
	n := req.InputTokens
	if n == 0 {
		n = len(req.Keys) * bs
	}
	switch {
	case n < 1:
		return Decision{}, fmt.Errorf("%w: no input tokens and no keys", ErrRequest)
	case len(req.Keys) > (n+bs-1)/bs:
		return Decision{}, fmt.Errorf("%w: %d keys for %d input tokens; at most one key per %d-token block", ErrRequest, len(req.Keys), n, bs)
	case req.OutputTokens < 0:
		return Decision{}, fmt.Errorf("%w: negative output tokens %d", ErrRequest, req.OutputTokens)
	}
	prefills, decodes := c.prefills, c.decodes
	if len(req.Exclude) > 0 {
		var out instSet
		for _, id := range req.Exclude {
			if in, ok := c.byID[id]; ok {
				out.add(in.slot)
			}
		}
		prefills.andNot(&out)
		decodes.andNot(&out)
	}
	if prefills.empty() {
		return Decision{}, ErrNoPrefill
	}
	id := req.ID
	if id == "" {
		c.nextID++
		id = "r" + strconv.FormatUint(c.nextID, 10)
	}
	if _, dup := c.flights[id]; dup {
		return Decision{}, fmt.Errorf("%w: request %q is in flight", ErrDuplicate, id)
	}
	out := req.OutputTokens
	if out == 0 {
		out = c.opts.DefaultOutputTokens
	}
	tokens := func(blocks int) int { return min(blocks*bs, n) }

	// Line 3: every holder's prefix length in one pass, and the best one.
	cands := prefills
	for i := range cands {
		cands[i] |= c.stores[i]
	}
	c.holders.match(req.Keys, cands, &c.lens)
	var sources [MaxInstances]Source // where each slot's prefix sits: HBM for engines
	c.stores.forEach(func(s int) { sources[s] = SourceDRAM })
	for _, h := range req.Pool {
		in, ok := c.byID[h.Instance]
		if !ok || in.Role != RoleStore {
			return Decision{}, fmt.Errorf("%w: pool hit on %q, which is not a registered store instance", ErrRequest, h.Instance)
		}
		if h.Blocks < 0 || h.Blocks > len(req.Keys) || h.Source >= NumSources {
			return Decision{}, fmt.Errorf("%w: pool hit of %d blocks from %s for %d keys", ErrRequest, h.Blocks, h.Source, len(req.Keys))
		}
		if h.Blocks >= c.lens[in.slot] {
			c.lens[in.slot], sources[in.slot] = h.Blocks, h.Source
		}
	}
	for _, h := range req.Held {
		if h.Blocks < 0 || h.Blocks > len(req.Keys) {
			return Decision{}, fmt.Errorf("%w: %q holds %d blocks of %d keys", ErrRequest, h.Instance, h.Blocks, len(req.Keys))
		}
		if in, ok := c.byID[h.Instance]; ok && in.Role == RolePrefill && h.Blocks > c.lens[in.slot] {
			c.lens[in.slot] = h.Blocks
		}
	}
	bestLen, best := 0, (*instance)(nil)
	cands.forEach(func(s int) {
		if c.lens[s] > bestLen {
			bestLen, best = c.lens[s], c.slots[s]
		}
	})

	// Lines 4-16: the prefill instance.
	var (
		p                 *instance
		ttft, tq, tp, tt  time.Duration
		ownLen, prefixLen int
		pulls             bool
	)
	consider := func(in *instance, own, prefix int, transfer time.Duration) {
		queue := in.queueTime(now)
		pre := c.opts.Prefill.Estimate(n, tokens(prefix))
		if t := transfer + queue + pre; p == nil || t < ttft {
			p, ttft, tq, tp, tt = in, t, queue, pre, transfer
			ownLen, prefixLen, pulls = own, prefix, prefix > own
		}
	}
	switch c.opts.Policy {
	case PolicyCacheGlobal:
		prefills.forEachFrom(c.tieNext, func(s int) {
			own := c.lens[s]
			if c.pullsBest(bestLen, own) {
				consider(c.slots[s], own, bestLen, c.transferTime(tokens(bestLen)-tokens(own), sources[best.slot]))
			}
			// Computing from the own prefix stays an option: a pull over
			// a slow path (SSD, a congested link) can cost more than it
			// saves, and the paper's x/0 rule would otherwise make an
			// instance that holds nothing pay for any transfer. On a tie
			// the pull, considered first, wins.
			consider(c.slots[s], own, own, 0)
		})
	case PolicyCacheLocal:
		prefills.forEachFrom(c.tieNext, func(s int) { consider(c.slots[s], c.lens[s], c.lens[s], 0) })
	case PolicyLoad:
		var light *instance
		prefills.forEach(func(s int) {
			if in := c.slots[s]; light == nil || in.queueEnd < light.queueEnd {
				light = in
			}
		})
		consider(light, c.lens[light.slot], c.lens[light.slot], 0)
	case PolicyRandom:
		k := c.rng.IntN(c.count(&prefills))
		prefills.forEach(func(s int) {
			if k == 0 {
				consider(c.slots[s], c.lens[s], c.lens[s], 0)
			}
			k--
		})
	case PolicyRoundRobin:
		// The next slot after the last choice, wrapping: instances that
		// come and go neither skip nor repeat a turn.
		first, next := -1, -1
		prefills.forEach(func(s int) {
			if first < 0 {
				first = s
			}
			if next < 0 && s > c.rrLast {
				next = s
			}
		})
		if next < 0 {
			next = first
		}
		c.rrLast = next
		consider(c.slots[next], c.lens[next], c.lens[next], 0)
	}

	c.tieNext = p.slot + 1
	kv := int64(n + out)
	d := Decision{
		RequestID:         id,
		Prefill:           p.ID,
		PrefillAddr:       p.Addr,
		PrefixTokens:      tokens(prefixLen),
		LocalPrefixTokens: tokens(ownLen),
		BestPrefixTokens:  tokens(bestLen),
		Estimates:         Estimates{Transfer: tt, Queue: tq, Prefill: tp, TTFT: ttft},
	}
	if best != nil {
		d.BestHolder = best.ID
	}

	// Line 17: the decode instance.
	dec := c.selectDecode(&decodes, kv)
	if dec != nil {
		d.Decode, d.DecodeAddr = dec.ID, dec.Addr
		switch c.opts.Rejection {
		case RejectPredicted:
			d.Estimates.TBT = c.tbtAt(dec, now, now+ttft, kv, true)
		default:
			d.Estimates.TBT = c.tbtAt(dec, now, now, kv, false)
		}
	}

	// Lines 18-19: reject what cannot meet its SLOs.
	if c.opts.Rejection != RejectNone {
		if ttft > c.opts.TTFTSLO {
			d.Rejected = ReasonTTFT
			return d, nil
		}
		if d.Estimates.TBT > c.opts.TBTSLO {
			d.Rejected = ReasonTBT
			return d, nil
		}
	}

	// Lines 20-22: migrate the prefix, commit the placement.
	if pulls {
		d.Pull = &Pull{From: best.ID, FromAddr: best.Addr, To: p.ID, Keys: req.Keys[ownLen:bestLen], Tokens: tokens(bestLen) - tokens(ownLen)}
		d.PullSource = sources[best.slot]
	}
	p.queueEnd = max(p.queueEnd, now) + tt + tp
	p.scheduled++
	f := &flight{id: id, prefill: p, decode: dec, kv: kv, prefillEnd: p.queueEnd}
	c.flights[id] = f
	if dec != nil {
		dec.members = append(dec.members, f)
		dec.scheduled++
	}
	return d, nil
}

// pullsBest is line 5: best_len / prefix_len > kvcache_balancing_threshold,
// with x/0 infinite for x > 0 (and 0/0 not above any threshold).
func (c *Core) pullsBest(bestLen, own int) bool {
	if own == 0 {
		return bestLen > 0
	}
	return float64(bestLen)/float64(own) > c.opts.BalancingThreshold
}

// transferTime estimates pulling tokens of KV cache from src over its
// configured bandwidth.
func (c *Core) transferTime(tokens int, src Source) time.Duration {
	if tokens <= 0 {
		return 0
	}
	return seconds(float64(tokens) * float64(c.opts.KVBytesPerToken) / c.opts.SourceBandwidth[src])
}

func (c *Core) count(s *instSet) int {
	n := 0
	s.forEach(func(int) { n++ })
	return n
}

// selectDecode picks the decode instance whose batch, counting every
// request already sent to it and this one, has the smallest TBT. Counting
// requests still in prefill spreads a burst over the pool instead of
// sending all of it to whichever instance is idle now.
func (c *Core) selectDecode(decodes *instSet, kv int64) *instance {
	var (
		best    *instance
		bestTBT = math.Inf(1)
	)
	decodes.forEach(func(s int) {
		in := c.slots[s]
		b, k := in.baseBatch+len(in.members)+1, in.baseKV+kv
		for _, f := range in.members {
			k += f.kv
		}
		if t := c.opts.Decode.Seconds(b, k) * Slowdown(k, in.decodeCapacity()); t < bestTBT {
			best, bestTBT = in, t
		}
	})
	return best
}

// tbtAt estimates in's TBT at time t with one more request of kv tokens.
// For t = now it counts the requests in the batch (prefilled, or predicted
// to be). With predict set it is the prediction of the overload notes:
// requests whose prefill ends by t join, and those that reach the uniform
// decode time t_d between now and t leave. A request already decoding for
// longer than t_d at now stays: it is observably still there, and long
// outputs are exactly the ones that outlive t_d (the batch holds them
// longer, so it is biased towards them).
func (c *Core) tbtAt(in *instance, now, t time.Duration, kv int64, predict bool) time.Duration {
	b, k := 1, kv
	td := c.opts.DecodeTime
	leaves := func(joined time.Duration) bool {
		end := joined + td
		return predict && now < end && end <= t
	}
	if !leaves(in.baseAt) {
		b += in.baseBatch
		k += in.baseKV
	}
	for _, f := range in.members {
		if !f.joinedBy(t) || leaves(f.prefillEnd) {
			continue
		}
		b++
		k += f.kv
	}
	return seconds(c.opts.Decode.Seconds(b, k) * Slowdown(k, in.decodeCapacity()))
}
