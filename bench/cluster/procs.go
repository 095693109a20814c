package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/client"
)

// The GET and put measurements of the cluster benchmark can run on nodes
// started as processes of their own (Options.Binary), as in any
// deployment: a read of a block held elsewhere then crosses the process
// boundaries it crosses in production, and no node shares a Go runtime, a
// scheduler or a garbage collector with the client or with the other node.

// procEnv is the environment of node processes: this one's without its
// YUEBING_* variables, plus settings that have no flag.
func procEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "YUEBING_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// startProc starts `yuebing serve` as a child process named name in dir
// with args after the common ones.
func startProc(ctx context.Context, bin, dir, name string, env []string, o *Options, args ...string) (*bench.Node, error) {
	hc := &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}}
	n := &bench.Node{Proc: bench.Proc{Name: name, Bin: bin, Env: env}, Dir: filepath.Join(dir, name), Hc: hc}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	n.Log = lf
	n.Args = append([]string{"serve", "--http-listen", "127.0.0.1:0", "--resp-listen", "", "--shm-listen", "",
		"--data-dir", n.Dir, "--dram-capacity", fmt.Sprint(o.DRAMCapacity), "--ssd-capacity", fmt.Sprint(4 << 20),
		"--max-block-size", fmt.Sprint(max(o.GetSize, o.BlockBytes)), "--log-level", "warn"}, args...)
	if err := n.StartOnce(ctx); err != nil {
		lf.Close()
		return nil, err
	}
	return n, nil
}

// startProcCluster starts a cluster of o.Nodes node processes, the first
// with an embedded etcd, and waits until the leader has every node's state.
func startProcCluster(ctx context.Context, o *Options, admit string) (*benchCluster, error) {
	dir, err := bench.TempDir()
	if err != nil {
		return nil, err
	}
	bc := &benchCluster{dir: dir}
	env := procEnv("YUEBING_CLUSTER_ETCD_EMBEDDED_PEER_LISTEN=127.0.0.1:0",
		"YUEBING_CLUSTER_REPORT_INTERVAL=50ms", "YUEBING_SSD_NO_SYNC=true",
		fmt.Sprintf("YUEBING_CLUSTER_HOT_HITS=%d", o.HotHits),
		fmt.Sprintf("YUEBING_CLUSTER_MAX_FETCH_BYTES=%d", max(256<<20, o.GetSize)))
	for i := range o.Nodes {
		args := []string{"--transfer-listen", "127.0.0.1:0", "--cluster", "bench", "--node-name", bc.name(i), "--cluster-admit", admit}
		if i == 0 {
			args = append(args, "--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0")
		} else {
			args = append(args, "--etcd", bc.procs[0].Etcd)
		}
		n, err := startProc(ctx, o.Binary, dir, bc.name(i), env, o, args...)
		if err != nil {
			bc.close()
			return nil, err
		}
		bc.procs = append(bc.procs, n)
		bc.clients = append(bc.clients, n.Client())
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := bc.procs[0].Status(ctx)
		if err == nil && st.HasLeader && st.LeaderStatus != nil && len(st.LeaderStatus.Nodes) == o.Nodes {
			return bc, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			bc.close()
			return nil, errors.New("bench: cluster: the node processes did not form a cluster within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaderName is the name of the cluster's leader, as node 0 knows it.
func (bc *benchCluster) leaderName(ctx context.Context) (string, bool) {
	if len(bc.procs) > 0 {
		st, err := bc.procs[0].Status(ctx)
		if err != nil || !st.HasLeader {
			return "", false
		}
		return st.Leader.Name, true
	}
	li, ok := bc.nodes[0].Cluster().Leader()
	return li.Name, ok
}

// startSingle starts one node outside any cluster, the baseline of the put
// measurement, in the same form (process or not) as bc's nodes.
func (bc *benchCluster) startSingle(ctx context.Context, o *Options) (c *client.Client, stop func(), err error) {
	if len(bc.procs) > 0 {
		env := procEnv("YUEBING_SSD_NO_SYNC=true")
		so := *o
		so.DRAMCapacity = max(o.DRAMCapacity, 64<<20)
		n, err := startProc(ctx, o.Binary, bc.dir, "single", env, &so, "--transfer-listen", "")
		if err != nil {
			return nil, nil, err
		}
		return n.Client(), n.Stop, nil
	}
	return startSingleInProcess(bc, o)
}
