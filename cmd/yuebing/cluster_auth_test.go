package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// With tenants' tokens on, a cluster without cluster.token_file is refused:
// its token would be derived from the cluster's name, and anyone knowing
// the name could read and delete every tenant's blocks through the
// internal API.
func TestClusterAuthNeedsClusterToken(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("cluster-admin-token-0001: {tenant: ops, role: admin}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A node that starts is killed when the context ends: the test
	// fails instead of waiting for it.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--cluster", "test", "--node-name", "a", "--etcd-embedded",
		"--etcd-embedded-listen", "127.0.0.1:0", "--auth-tokens-file", tokens,
		"--http-listen", "127.0.0.1:0", "--transfer-listen", "127.0.0.1:0", "--resp-listen", "",
		"--data-dir", filepath.Join(dir, "data"), "--dram-capacity", "2MiB")
	cmd.Env = envWithout("YUEBING_")
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "cluster.token_file") || !strings.Contains(string(out), "auth.tokens_file") {
		t.Fatalf("serve with auth and no cluster token: %v\n%s", err, out)
	}
}

// A cluster with a token and tenants' tokens: its embedded etcd answers
// only the nodes (they log in with the password the token gives), the
// nodes form, and one node's console reads the other's figures without
// the admin's token leaving it.
func TestClusterWithTokenAndAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("two node processes: not in -short")
	}
	const admin = "cluster-admin-token-0001"
	root := t.TempDir()
	tokens := filepath.Join(root, "tokens.yaml")
	ctok := filepath.Join(root, "cluster.token")
	if err := os.WriteFile(tokens, []byte(admin+": {tenant: ops, role: admin}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ctok, []byte("cluster-secret-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--auth-tokens-file", tokens, "--cluster-token-file", ctok}
	a := serveCluster(t, "a", filepath.Join(root, "a"), append(common, "--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0")...)
	b := serveCluster(t, "b", filepath.Join(root, "b"), append(common, "--etcd", a.banner["etcd"])...)

	hdr := map[string]string{"Authorization": "Bearer " + admin}
	type nodes struct {
		Nodes []struct {
			Name  string `json:"name"`
			Error string `json:"error"`
			Stats *struct {
				Node string `json:"node"`
			} `json:"stats"`
		} `json:"nodes"`
	}
	waitFor(t, 30*time.Second, "a reads b's figures", func() string {
		code, body, _ := a.do(t, "GET", "/v1/cluster/nodes", nil, hdr)
		if code != 200 {
			return fmt.Sprintf("GET /v1/cluster/nodes: %d %s", code, body)
		}
		var got nodes
		if err := json.Unmarshal(body, &got); err != nil {
			return err.Error()
		}
		if len(got.Nodes) != 2 {
			return fmt.Sprintf("%d nodes", len(got.Nodes))
		}
		for _, n := range got.Nodes {
			if n.Stats == nil || n.Stats.Node != n.Name {
				return fmt.Sprintf("%s: %q", n.Name, n.Error)
			}
		}
		return ""
	})
	_ = b

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{a.banner["etcd"]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(t.Context(), "/yuebing/test/members/7", `{"id":7,"name":"evil","addrs":{"http":"127.0.0.1:1"}}`); err == nil {
		t.Error("a client without the cluster's password wrote to the embedded etcd")
	}
	if resp, err := cli.Get(t.Context(), "/yuebing/", clientv3.WithPrefix()); err == nil {
		t.Errorf("a client without the cluster's password read %d keys from the embedded etcd", len(resp.Kvs))
	}
}
