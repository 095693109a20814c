package server

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/yuebing/yuebing/server/auth"
)

// banner prints where the node listens and what it stores: a few lines an
// operator reads once.
func (n *Node) banner(tokens *auth.Tokens) {
	c := n.cfg
	w := tabwriter.NewWriter(c.Banner, 0, 0, 2, ' ', 0)
	v := c.Version
	if v == "" {
		v = "yuebing"
	}
	fmt.Fprintf(w, "%s\n", v)
	fmt.Fprintf(w, "  http\thttp://%s\n", n.Addr("http"))
	if a := n.Addr("resp"); a != nil {
		fmt.Fprintf(w, "  resp\tredis://%s\n", a)
	} else {
		fmt.Fprintf(w, "  resp\tdisabled\n")
	}
	if cn := n.clusterNode(); cn != nil {
		fmt.Fprintf(w, "  transfer\t%s (block transfers between nodes)\n", cn.TransferAddr())
	} else if c.Transfer.Listen != "" {
		fmt.Fprintf(w, "  transfer\t%s (configured; serves in a cluster: --cluster)\n", c.Transfer.Listen)
	} else {
		fmt.Fprintf(w, "  transfer\tdisabled\n")
	}
	if n.staging != nil {
		fmt.Fprintf(w, "  shm\t%s (shared memory for clients on this host)\n", n.staging.Addr())
	}
	if cn := n.clusterNode(); cn != nil {
		cc := c.Cluster
		fmt.Fprintf(w, "  cluster\t%s as %s (node %d), etcd %s\n", cc.Cluster, cn.Name(), cn.ID(), n.etcdEndpoints())
		if e := n.cluster.etcd; e != nil {
			fmt.Fprintf(w, "  etcd\t%s (embedded, data in %s)\n", e.Endpoint(), filepath.Join(c.DataDir, "etcd"))
		}
	}
	st := n.store.Stats()
	for i, t := range st.Tiers {
		extra := c.DRAM.Policy
		if i == 1 {
			dir, _ := filepath.Abs(filepath.Join(c.DataDir, "ssd"))
			extra = fmt.Sprintf("%s, compression %s, %d blocks kept", dir, c.SSD.Compression, t.Blocks)
		}
		fmt.Fprintf(w, "  %s\t%s (%s)\n", t.Name, ByteSize(t.Capacity), extra)
	}
	dir, _ := filepath.Abs(c.DataDir)
	fmt.Fprintf(w, "  data\t%s\n", dir)
	switch {
	case tokens.Enabled():
		fmt.Fprintf(w, "  auth\tbearer tokens, %d from %s\n", tokens.Len(), c.Auth.TokensFile)
	case c.Insecure:
		fmt.Fprintf(w, "  auth\tOFF (--insecure)\n")
	default:
		fmt.Fprintf(w, "  auth\toff (loopback only)\n")
	}
	if cc := c.Conductor; cc.Enabled {
		fmt.Fprintf(w, "  conductor\thttp://%s/v1/conductor (%s, %s rejection)\n", n.Addr("http"), cc.Policy, cc.Rejection)
	}
	if k := n.api.contexts.len(); k > 0 {
		fmt.Fprintf(w, "  contexts\t%d restored\n", k)
	}
	w.Flush()
}

func (n *Node) etcdEndpoints() string {
	if eps := n.cfg.Cluster.Endpoints; len(eps) > 0 {
		return strings.Join(eps, ",")
	}
	if e := n.cluster.etcd; e != nil {
		return e.Endpoint()
	}
	return ""
}
