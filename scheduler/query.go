package scheduler

import (
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// InstanceMatch is one instance's cached prefix of a chain.
type InstanceMatch struct {
	ID   string `json:"id"`
	Role Role   `json:"role"`
	// Blocks is how many leading keys of the chain it holds.
	Blocks int `json:"blocks"`
	// PerTier[i] counts those whose fastest copy is in tier i.
	PerTier [index.MaxTiers]int `json:"per_tier"`
}

// Query returns, for every prefill and store instance in registration slot
// order, the longest prefix of chain it holds and where those blocks are.
func (c *Core) Query(chain []block.Key) []InstanceMatch {
	cands := c.prefills
	for i := range cands {
		cands[i] |= c.stores[i]
	}
	c.holders.match(chain, cands, &c.lens)
	var out []InstanceMatch
	cands.forEach(func(s int) {
		in := c.slots[s]
		m := InstanceMatch{ID: in.ID, Role: in.Role, Blocks: c.lens[s]}
		for _, k := range chain[:m.Blocks] {
			if top := c.holders.tierOf(s, k).Top(); top >= 0 {
				m.PerTier[top]++
			}
		}
		out = append(out, m)
	})
	return out
}

// InstanceStatus is an instance's registration and live state.
type InstanceStatus struct {
	Instance
	// Blocks it holds (prefill and store instances).
	Blocks int64 `json:"blocks"`
	// QueueTime is its predicted prefill queue (prefill instances).
	QueueTime time.Duration `json:"queue_time"`
	// Batch, KVTokens and TBT describe its decode batch now (decode
	// instances), including requests predicted to have joined.
	Batch    int           `json:"batch"`
	KVTokens int64         `json:"kv_tokens"`
	TBT      time.Duration `json:"tbt"`
	// Load is QueueTime over the TTFT SLO or TBT over the TBT SLO: above 1
	// the instance cannot meet its SLO.
	Load float64 `json:"load"`
	// Scheduled counts the requests sent to it.
	Scheduled int64 `json:"scheduled"`
	// SinceHeartbeat is the time since its last heartbeat (or registration).
	SinceHeartbeat time.Duration `json:"since_heartbeat"`
}

// Instances returns every instance's status at now, in slot order.
func (c *Core) Instances(now time.Duration) []InstanceStatus {
	var out []InstanceStatus
	for s, in := range c.slots {
		if in == nil {
			continue
		}
		st := InstanceStatus{Instance: in.Instance, Blocks: c.holders.count[s], Scheduled: in.scheduled, SinceHeartbeat: now - in.lastHeartbeat}
		switch in.Role {
		case RolePrefill:
			st.QueueTime = in.queueTime(now)
			st.Load = st.QueueTime.Seconds() / c.opts.TTFTSLO.Seconds()
		case RoleDecode:
			st.Batch, st.KVTokens = in.baseBatch, in.baseKV
			for _, f := range in.members {
				if f.joinedBy(now) {
					st.Batch++
					st.KVTokens += f.kv
				}
			}
			st.TBT = seconds(c.opts.Decode.Seconds(st.Batch, st.KVTokens) * Slowdown(st.KVTokens, in.decodeCapacity()))
			st.Load = st.TBT.Seconds() / c.opts.TBTSLO.Seconds()
		}
		out = append(out, st)
	}
	return out
}
