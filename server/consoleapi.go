package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/cluster"
	"github.com/yuebing/yuebing/router"
	"github.com/yuebing/yuebing/scheduler"
	"github.com/yuebing/yuebing/server/console"
)

// The endpoints the operator console reads beyond the API's own: the
// counters' recent history, every member's figures and the hottest
// blocks. All are admin-only reads.

// startHistory samples the store's counters in the background until
// Close.
func (a *API) startHistory() {
	a.history = console.NewHistory(console.HistoryOptions{
		Interval: a.opts.HistoryInterval,
		Sample:   a.sample,
	})
	// The first sample before the API serves: the history's first
	// interval is measured from it, whenever Run's goroutine starts.
	a.history.Add(a.sample())
	ctx, cancel := context.WithCancel(context.Background())
	a.stopBg = cancel
	a.bg.Go(func() { a.history.Run(ctx) })
	if a.opts.Cluster != nil {
		// Other members read this node's figures for their console's
		// cluster page, with the cluster token (clusterNodes).
		a.opts.Cluster.SetStats(func() any { return a.stats() })
	}
}

func (a *API) sample() console.Sample {
	st := a.store.Stats()
	s := console.Sample{
		Time: a.opts.Now(), Hits: st.Hits, Misses: st.Misses, Blocks: st.Blocks,
		Requests: a.metrics.requests.Load(),
	}
	for _, t := range st.Tiers {
		s.Evictions += t.Evictions
		s.Demotions += t.Demotions
		s.Promotions += t.Promotions
		s.Tiers = append(s.Tiers, console.TierFill{Name: t.Name, Used: t.Used, Capacity: t.Capacity, Blocks: t.Blocks})
	}
	s.FrontEnds = map[string]console.FrontEnd{"http": a.metrics.latency.Read()}
	if a.opts.Staging != nil {
		s.FrontEnds["shm"] = a.shmLatency.Read()
	}
	// The Redis front end times its commands through RESPLatency; the
	// transfer service counts blocks in the node's metrics, untimed.
	counts := a.gatherCounters(frontEndCounters)
	if _, ok := counts["yuebing_resp_commands_total"]; ok {
		s.FrontEnds["redis"] = a.respLatency.Read()
	}
	sent, okSent := counts["yuebing_transfer_blocks_sent_total"]
	read, okRead := counts["yuebing_transfer_blocks_read_total"]
	if okSent || okRead {
		s.FrontEnds["transfer"] = console.FrontEnd{Requests: sent + read}
	}
	return s
}

// frontEndCounters are the metrics that count the requests of the front
// ends the API does not time itself.
var frontEndCounters = map[string]bool{
	"yuebing_resp_commands_total":        true,
	"yuebing_transfer_blocks_sent_total": true,
	"yuebing_transfer_blocks_read_total": true,
}

// gatherCounters returns the named counters of the node's registry, each
// summed over its labels; a metric the node does not export is absent.
func (a *API) gatherCounters(names map[string]bool) map[string]int64 {
	out := map[string]int64{}
	mfs, err := a.opts.Registry.Gather()
	if err != nil && len(mfs) == 0 {
		return out
	}
	for _, mf := range mfs {
		if !names[mf.GetName()] {
			continue
		}
		var n float64
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
		out[mf.GetName()] = int64(n)
	}
	return out
}

type historyResponse struct {
	IntervalSeconds float64          `json:"interval_seconds"`
	Samples         []console.Sample `json:"samples"`
}

// getHistory answers GET /v1/stats/history.
func (a *API) getHistory(c *gin.Context) {
	if err := requireAdmin(principal(c)); err != nil {
		a.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, historyResponse{IntervalSeconds: a.history.Interval().Seconds(), Samples: a.history.Samples()})
}

// memberStats is one member's figures as GET /v1/cluster/nodes gives them.
type memberStats struct {
	cluster.Member
	Leader bool `json:"leader"`
	Self   bool `json:"self"`
	// Stats is the member's GET /v1/stats, absent when Error says why it
	// could not be read.
	Stats *statsResponse `json:"stats,omitempty"`
	Error string         `json:"error,omitempty"`
}

// memberStatsTimeout bounds the wait for one member: a console page
// polls, and a slow member must not hold the others' figures.
const memberStatsTimeout = 3 * time.Second

// clusterNodes answers GET /v1/cluster/nodes: every member with its own
// figures, read from the member over the cluster's internal API with the
// cluster token. The caller's Authorization stays here: an admin's token
// sent to whatever address a member record names would be the admin's
// token handed to whoever wrote that record.
func (a *API) clusterNodes(c *gin.Context) {
	cn, err := a.clusterNode()
	if err != nil {
		a.fail(c, err)
		return
	}
	members := cn.Members()
	leader, hasLeader := cn.Leader()
	self := cn.ID()
	out := make([]memberStats, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		out[i] = memberStats{Member: m, Leader: hasLeader && m.ID == leader.ID, Self: m.ID == self}
		if out[i].Self {
			st := a.stats()
			out[i].Stats = &st
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(c.Request.Context(), memberStatsTimeout)
			defer cancel()
			var st statsResponse
			if err := cn.MemberStats(ctx, m.ID, &st); err != nil {
				out[i].Error = err.Error()
				return
			}
			out[i].Stats = &st
		})
	}
	wg.Wait()
	c.JSON(http.StatusOK, gin.H{"nodes": out})
}

// hotBlock is a hot block with where its copies are.
type hotBlock struct {
	cluster.HotBlock
	Nodes []cluster.HolderInfo `json:"nodes"`
}

// defaultHot is how many hot blocks GET /v1/cluster/hot lists unless
// asked: a screenful.
const defaultHot = 20

// clusterHot answers GET /v1/cluster/hot?limit=N: the blocks read most in
// the leader's heat window, with their replica counts and holders.
func (a *API) clusterHot(c *gin.Context) {
	cn, err := a.clusterNode()
	if err != nil {
		a.fail(c, err)
		return
	}
	limit := defaultHot
	if s := c.Query("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > cluster.MaxHot {
			a.fail(c, fmt.Errorf("%w: limit %q: want 1 to %d", ErrBadRequest, s, cluster.MaxHot))
			return
		}
	}
	hot, err := cn.Hot(c.Request.Context(), limit)
	if err != nil {
		a.fail(c, err)
		return
	}
	out := make([]hotBlock, len(hot))
	if len(hot) > 0 {
		keys := make([]block.Key, len(hot))
		for i, h := range hot {
			keys[i] = h.Key
		}
		hs, err := cn.Holders(c.Request.Context(), keys)
		if err != nil {
			a.fail(c, err)
			return
		}
		for i, h := range hot {
			out[i] = hotBlock{HotBlock: h, Nodes: hs[i]}
		}
	}
	c.JSON(http.StatusOK, gin.H{"blocks": out})
}

// conductorStats is GET /v1/conductor/stats: the conductor's figures and,
// where the node runs a router, the router's engines and counters.
type conductorStats struct {
	scheduler.Stats
	Router *router.Status `json:"router,omitempty"`
}

// stats answers GET /v1/conductor/stats: decisions, instances and
// migrations, and the router the node runs, for the console's conductor
// page.
func (s *ConductorAPI) stats(c *gin.Context) {
	out := conductorStats{Stats: s.d.Stats()}
	if r, ok := s.reg.(*router.Router); ok {
		st := r.Status()
		out.Router = &st
	}
	c.JSON(http.StatusOK, out)
}
