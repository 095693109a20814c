package soak

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/tier/s3/versitygw"
)

// S3Options give the soak's nodes an S3 tier under their SSD (the server's
// s3 section), either a versitygw the soak runs on 127.0.0.1 over a
// directory of its own (Local), which it kills once mid-run and restarts,
// or an external bucket (Endpoint, Bucket), which it leaves alone.
type S3Options struct {
	// Local starts versitygw (Versitygw, default: on PATH or in $(go env
	// GOPATH)/bin) with a bucket and fresh random credentials.
	Local     bool
	Versitygw string
	// Endpoint and Bucket name an external bucket (host:port or an
	// http(s) URL); its credentials come from CredentialsFile (YAML with
	// access_key_id and secret_access_key) or the environment's
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, handed to the nodes and
	// never logged.
	Endpoint, Bucket, CredentialsFile string
	// Namespace prefixes the objects; each node gets Namespace/<node> so
	// nodes do not read each other's blocks. Default "yuebing-soak/" and
	// the start time, so runs sharing a bucket do not meet.
	Namespace string
	// Capacity is each node's s3.capacity. Default 4 x (DRAM + SSD).
	Capacity int64
	// SegmentSize is each node's s3.segment_size. Default 4 MiB, small so
	// that a short soak uploads many segments and reads them back.
	SegmentSize int64
	// KillAt is when the local server is killed (SIGKILL), DownFor how
	// long it stays down before it is restarted on its directory. Defaults
	// 2/5 of the duration and min(15s, duration/5); a negative KillAt
	// never kills it. An external bucket is never killed.
	KillAt, DownFor time.Duration
}

// Enabled says whether the nodes get an S3 tier.
func (o *S3Options) Enabled() bool { return o.Local || o.Endpoint != "" || o.Bucket != "" }

func (o *S3Options) ensureDefaults(so *Options) {
	if !o.Enabled() {
		return
	}
	if o.Local && o.Versitygw == "" {
		o.Versitygw = versitygw.Binary()
	}
	if o.Namespace == "" {
		o.Namespace = fmt.Sprintf("yuebing-soak/%d", time.Now().UnixNano())
	}
	if o.Capacity == 0 {
		o.Capacity = 4 * (so.DRAMCapacity + so.SSDCapacity)
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = 4 << 20
	}
	if o.KillAt == 0 {
		o.KillAt = so.Duration * 2 / 5
	}
	if o.DownFor == 0 {
		o.DownFor = min(15*time.Second, so.Duration/5)
	}
	if !o.Local {
		o.KillAt = -1
	}
}

func (o *S3Options) validate(so *Options, bad func(string, ...any)) {
	if !o.Enabled() {
		return
	}
	switch {
	case o.Local && (o.Endpoint != "" || o.Bucket != ""):
		bad("s3: a local versitygw or an external endpoint and bucket, not both")
	case o.Local && o.Versitygw == "":
		bad("s3: %v", versitygw.ErrNotInstalled)
	case !o.Local && (o.Endpoint == "" || o.Bucket == ""):
		bad("s3: an external bucket needs both an endpoint and a bucket")
	}
	if o.Capacity < so.SSDCapacity {
		bad("s3: capacity %d: want at least the SSD tier (%d)", o.Capacity, so.SSDCapacity)
	}
	if o.SegmentSize < 64<<10 || o.SegmentSize > 256<<20 {
		bad("s3: segment size %d: want 64 KiB to 256 MiB", o.SegmentSize)
	}
	if o.KillAt >= 0 && (o.KillAt >= so.Duration || o.DownFor <= 0 || o.KillAt+o.DownFor >= so.Duration) {
		bad("s3: kill at %s for %s: want both positive and within the duration %s", o.KillAt, o.DownFor, so.Duration)
	}
}

// memBytes is what a node's S3 tier may buffer: s3.max_pending (four
// segments, its default) and the segment being filled.
func (o *S3Options) memBytes() int64 {
	if !o.Enabled() {
		return 0
	}
	return 5 * o.SegmentSize
}

// startS3Server runs versitygw over dir/s3, its output in dir/s3.log, with
// random credentials (never logged).
func startS3Server(ctx context.Context, bin, dir string) (*versitygw.Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(filepath.Join(dir, "s3.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	gw, err := versitygw.Start(ctx, versitygw.Options{Binary: bin, Dir: filepath.Join(dir, "s3"), Bucket: "soak", Log: lf})
	if err != nil {
		return nil, fmt.Errorf("bench: soak: %w: %s", err, bench.LogTail(lf.Name(), 0))
	}
	return gw, nil
}

// s3Env is the environment that gives node name its S3 tier: the s3
// section as YUEBING_S3_* variables, the credentials as AWS_* variables
// (or the credentials file's name). Short intervals, so that a soak of a
// few minutes sees uploads, the outage and the recovery.
func (s *soak) s3Env(name string) []string {
	o := &s.o.S3
	env := []string{
		"YUEBING_S3_NAMESPACE=" + o.Namespace + "/" + name,
		"YUEBING_S3_CAPACITY=" + strconv.FormatInt(o.Capacity, 10),
		"YUEBING_S3_SEGMENT_SIZE=" + strconv.FormatInt(o.SegmentSize, 10),
		"YUEBING_S3_FLUSH_INTERVAL=1s",
		"YUEBING_S3_REQUEST_TIMEOUT=2s",
		"YUEBING_S3_PROBE_INTERVAL=500ms",
		"YUEBING_S3_REFRESH_INTERVAL=-1s",
	}
	if s.s3srv != nil {
		return append(env, "YUEBING_S3_ENDPOINT="+s.s3srv.Endpoint, "YUEBING_S3_BUCKET="+s.s3srv.Bucket,
			"AWS_ACCESS_KEY_ID="+s.s3srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+s.s3srv.SecretKey)
	}
	env = append(env, "YUEBING_S3_ENDPOINT="+o.Endpoint, "YUEBING_S3_BUCKET="+o.Bucket)
	if o.CredentialsFile != "" {
		env = append(env, "YUEBING_S3_CREDENTIALS_FILE="+o.CredentialsFile)
	}
	return env
}

// S3 is the S3 part's figures, summed over the nodes and their lives
// (a node's counters start again at each restart; what it counted in the
// last half second before a kill is not seen).
type S3 struct {
	// Demoted counts blocks the nodes put in their S3 tier (the SSD's
	// evictions); Hits reads it served; Dropped demotions it refused while
	// degraded with its upload buffer full; RequestErrors failed S3
	// requests; Corrupt blocks it dropped on a failed check.
	Demoted, Hits, Dropped, RequestErrors, Corrupt int64
	// Kills counts kills of the local server.
	Kills int
	// DegradedSeconds is the longest time any node's tier reported itself
	// degraded, summed over the run; Recoveries the times a tier came back
	// by itself.
	DegradedSeconds float64
	Recoveries      int64
	// Nodes counts the nodes; DegradedNodes those whose tier reported
	// itself degraded after the kill (while the server was down, or after
	// its restart before every tier was healthy again: a node restarting
	// through the outage is first seen then), NotDegraded names the
	// others. A node that sent the bucket no request while it was down
	// (no failed request counted then: a node just restarted, with nothing
	// to demote or read) has nothing to notice the outage by: IdleNodes
	// names those of the others. DegradedSeen says some node's tier
	// reported the outage and every other node was idle.
	Nodes, DegradedNodes int
	NotDegraded          []string
	IdleNodes            []string
	DegradedSeen         bool
	// Recovered says every node's tier reported healthy after the server
	// came back, RecoverySeconds how long after the restart that was.
	Recovered       bool
	RecoverySeconds float64
	// OutageErrors counts client requests that failed while the server
	// was down or a tier degraded, with every node up (and up 5 s), but
	// for pins refused past the pinned-bytes limit (pinRefused).
	OutageErrors int64
	// Outage is the span of the kill: from the kill to the restart.
	OutageStart, OutageEnd time.Duration
}

// pinRefused is the error kind of a pin past the pinned-bytes limit.
const pinRefused = "http_507"

// Failed says whether the S3 part found a fault: a client error during
// the outage, a corrupt block, a kill that some node's tier did not
// report, or a tier that did not come back.
func (r *S3) Failed() bool {
	return r.OutageErrors > 0 || r.Corrupt > 0 || (r.Kills > 0 && (!r.DegradedSeen || !r.Recovered))
}

// s3State is the soak's running S3 figures.
type s3State struct {
	mu sync.Mutex
	// per node: the counters' last reading in the current life, the
	// totals of past readings, and the degraded time.
	nodes                  map[string]*s3NodeState
	down                   bool // the server is killed
	restartedAt, recovered time.Time
	kills                  int
	outageStart, outageEnd time.Duration
}

type s3NodeState struct {
	life        int64
	last, total map[string]float64
	degraded    bool
	degradedFor time.Duration
	// degradedSeen: the tier reported degraded after the kill.
	degradedSeen bool
	lastSample   time.Time
	// killMark is the kill errsAtKill was read for; triedInOutage says
	// the node's failed S3 requests rose while the server was down.
	killMark      int
	errsAtKill    float64
	triedInOutage bool
}

// s3Series are the /metrics series the sampler reads, by the short names
// the result uses.
var s3Series = map[string]string{
	`yuebing_tier_puts_total{tier="s3"}`:       "demoted",
	`yuebing_tier_hits_total{tier="s3"}`:       "hits",
	`yuebing_tier_corrupt_total{tier="s3"}`:    "corrupt",
	`yuebing_tier_recoveries_total{tier="s3"}`: "recoveries",
	`yuebing_s3_dropped_puts_total`:            "dropped",
}

// nodeS3Metrics reads a node's S3 series from /metrics: the counters above,
// the failed requests summed, and whether the tier is degraded.
func nodeS3Metrics(ctx context.Context, n *bench.Node) (map[string]float64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := n.Client()
	if c == nil {
		return nil, false, errors.New("bench: soak: node not started")
	}
	body, err := c.Metrics(ctx)
	if err != nil {
		return nil, false, err
	}
	return parseS3Metrics(body)
}

// parseS3Metrics reads the S3 series out of a /metrics page.
func parseS3Metrics(body []byte) (map[string]float64, bool, error) {
	out := map[string]float64{}
	degraded, seen := false, false
	for line := range strings.SplitSeq(string(body), "\n") {
		if !strings.HasPrefix(line, "yuebing_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		switch {
		case name == `yuebing_tier_degraded{tier="s3"}`:
			degraded, seen = v == 1, true
		case strings.HasPrefix(name, "yuebing_s3_requests_total{") && strings.Contains(name, `result="error"`):
			out["request_errors"] += v
		default:
			if short, ok := s3Series[name]; ok {
				out[short] = v
			}
		}
	}
	if !seen {
		return nil, false, errors.New("bench: soak: the node has no S3 tier in /metrics")
	}
	return out, degraded, nil
}

// sampleS3 reads every node's S3 series twice a second until ctx ends.
func (s *soak) sampleS3(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		for _, n := range s.nodes {
			// Only a node that is up: while a restarted node starts, its
			// new process answers /metrics (counters from 0) before its
			// life is counted, and would overwrite the last life's.
			if n.State.Load() != bench.NodeUp {
				continue
			}
			life := n.Life.Load()
			m, degraded, err := nodeS3Metrics(ctx, n)
			if err != nil {
				continue
			}
			s.s3.observe(n.Name, life, m, degraded, time.Now())
		}
		s.s3.checkRecovered(s.nodes)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (st *s3State) observe(node string, life int64, m map[string]float64, degraded bool, now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.nodes == nil {
		st.nodes = map[string]*s3NodeState{}
	}
	ns := st.nodes[node]
	if ns == nil {
		ns = &s3NodeState{last: map[string]float64{}, total: map[string]float64{}}
		st.nodes[node] = ns
	}
	prevErrs := ns.total["request_errors"] + ns.last["request_errors"]
	if life != ns.life {
		// A restart: the counters start from 0 again.
		for k, v := range ns.last {
			ns.total[k] += v
		}
		ns.last, ns.life = map[string]float64{}, life
		ns.lastSample = time.Time{}
	}
	for k, v := range m {
		ns.last[k] = v
	}
	if ns.degraded && !ns.lastSample.IsZero() {
		ns.degradedFor += now.Sub(ns.lastSample)
	}
	ns.degraded, ns.lastSample = degraded, now
	if st.down {
		if ns.killMark != st.kills {
			ns.killMark, ns.errsAtKill = st.kills, prevErrs
		}
		if ns.total["request_errors"]+ns.last["request_errors"] > ns.errsAtKill {
			ns.triedInOutage = true
		}
	}
	// Each node must show it noticed the outage. One that was down
	// (killed by the soak) while the server was can only show it after
	// the restart, until the tiers are all healthy again.
	if degraded && st.kills > 0 && (st.down || st.recovered.IsZero()) {
		ns.degradedSeen = true
	}
}

// checkRecovered notes when, after the server's restart, every node that
// is up reports its tier healthy.
func (st *s3State) checkRecovered(nodes []*bench.Node) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.restartedAt.IsZero() || !st.recovered.IsZero() {
		return
	}
	for _, n := range nodes {
		ns := st.nodes[n.Name]
		if ns == nil || ns.degraded || ns.lastSample.Before(st.restartedAt) {
			return
		}
	}
	st.recovered = time.Now()
}

// inOutage says whether a client error now counts against the S3 tier:
// the server is down, or a node's tier still reports degraded.
func (st *s3State) inOutage() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.down {
		return true
	}
	for _, ns := range st.nodes {
		if ns.degraded {
			return true
		}
	}
	return false
}

// killS3 kills the local server at KillAt, or once a node's kill cycle
// then under way has ended, restarts it DownFor later, and holds off node
// kills until every node's tier has recovered (see soak.faults).
func (s *soak) killS3(ctx, loadCtx context.Context) error {
	o := &s.o.S3
	select {
	case <-loadCtx.Done():
		return nil
	case <-time.After(time.Until(s.start.Add(o.KillAt))):
	}
	t0 := time.Now()
	if !s.holdFaults(loadCtx) {
		s.logf("the S3 server was not killed: a node's restart lasted until the end")
		return nil
	}
	defer s.releaseFaults()
	if d := time.Since(t0); d > 100*time.Millisecond {
		s.logf("the S3 server's kill waited %s for a node's restart", d.Round(time.Millisecond))
	}
	s.s3.mu.Lock()
	s.s3.down = true
	s.s3.kills++
	s.s3.outageStart = time.Since(s.start)
	s.s3.mu.Unlock()
	s.s3srv.Stop()
	s.logf("killed the S3 server (kill -9) for %s", o.DownFor)
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(o.DownFor):
	}
	err := s.s3srv.Restart(ctx)
	s.s3.mu.Lock()
	s.s3.down = false
	s.s3.restartedAt = time.Now()
	s.s3.outageEnd = time.Since(s.start)
	s.s3.mu.Unlock()
	if err != nil {
		return err
	}
	s.logf("restarted the S3 server")
	for {
		s.s3.mu.Lock()
		rec, restarted := s.s3.recovered, s.s3.restartedAt
		s.s3.mu.Unlock()
		if !rec.IsZero() {
			s.logf("every node's S3 tier healthy again %s after the restart", rec.Sub(restarted).Round(time.Millisecond))
			return nil
		}
		select {
		case <-loadCtx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// s3Result sums the nodes' figures.
func (s *soak) s3Result() *S3 {
	st := &s.s3
	st.mu.Lock()
	defer st.mu.Unlock()
	r := &S3{Kills: st.kills, Nodes: len(s.nodes), OutageErrors: s.s3OutageErrors.Load(),
		OutageStart: st.outageStart, OutageEnd: st.outageEnd}
	for _, n := range s.nodes {
		ns := st.nodes[n.Name]
		switch {
		case ns != nil && ns.degradedSeen:
			r.DegradedNodes++
		default:
			r.NotDegraded = append(r.NotDegraded, n.Name)
			if ns != nil && !ns.triedInOutage {
				r.IdleNodes = append(r.IdleNodes, n.Name)
			}
		}
	}
	r.DegradedSeen = r.DegradedNodes > 0 && r.DegradedNodes+len(r.IdleNodes) == r.Nodes
	if !st.recovered.IsZero() {
		r.Recovered = true
		r.RecoverySeconds = st.recovered.Sub(st.restartedAt).Seconds()
	}
	for _, ns := range st.nodes {
		sum := func(k string) int64 { return int64(ns.total[k] + ns.last[k]) }
		r.Demoted += sum("demoted")
		r.Hits += sum("hits")
		r.Dropped += sum("dropped")
		r.RequestErrors += sum("request_errors")
		r.Corrupt += sum("corrupt")
		r.Recoveries += sum("recoveries")
		r.DegradedSeconds = max(r.DegradedSeconds, ns.degradedFor.Seconds())
	}
	return r
}

// soakS3Row adds the S3 part's figures to the soak row.
func soakS3Row(row bench.Row, r *S3) {
	row["s3_demoted_blocks"] = r.Demoted
	row["s3_hits"] = r.Hits
	row["s3_dropped_demotions"] = r.Dropped
	row["s3_request_errors"] = r.RequestErrors
	row["s3_corrupt"] = r.Corrupt
	row["s3_kills"] = r.Kills
	row["s3_degraded_s"] = r.DegradedSeconds
	row["s3_degraded_seen"] = r.DegradedSeen
	row["s3_nodes"] = r.Nodes
	row["s3_degraded_nodes"] = r.DegradedNodes
	if r.Kills > 0 && len(r.NotDegraded) > 0 {
		row["s3_not_degraded"] = strings.Join(r.NotDegraded, ",")
	}
	if r.Kills > 0 && len(r.IdleNodes) > 0 {
		row["s3_idle_nodes"] = strings.Join(r.IdleNodes, ",")
	}
	row["s3_recovered"] = r.Recovered
	row["s3_recoveries"] = r.Recoveries
	row["s3_recovery_s"] = r.RecoverySeconds
	row["s3_outage_errors"] = r.OutageErrors
	if r.Kills > 0 {
		row["s3_outage_s"] = []float64{r.OutageStart.Seconds(), r.OutageEnd.Seconds()}
	}
}
