package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClusterConfigValidate(t *testing.T) {
	f := func(name string, mutate func(*Config), wants ...string) {
		t.Helper()
		c := validConfig(t)
		mutate(&c)
		c.EnsureDefaults()
		err := c.Validate()
		if len(wants) == 0 {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			return
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v", name, err)
			return
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error lacks %q:\n%v", name, w, err)
			}
		}
	}
	f("alone", func(c *Config) {})
	f("embedded dev cluster", func(c *Config) { c.Cluster.Name, c.Cluster.NodeName, c.Cluster.EtcdEmbedded = "dev", "a", true })
	f("external etcd", func(c *Config) {
		c.Cluster.Name, c.Cluster.NodeName, c.Cluster.Etcd = "prod", "a", "http://h1:2379, http://h2:2379"
	})
	f("etcd without a cluster", func(c *Config) { c.Cluster.Etcd = "http://h1:2379" }, "cluster.name", "--cluster")
	f("no etcd", func(c *Config) { c.Cluster.Name = "x" }, "cluster.etcd", "--etcd-embedded")
	f("bad names and URL", func(c *Config) {
		c.Cluster.Name, c.Cluster.NodeName, c.Cluster.Etcd = "a/b", "no spaces", "h1:2379"
	}, "cluster.name", "cluster.node_name", "cluster.etcd", "http://")
	f("no transfer listener", func(c *Config) {
		c.Cluster.Name, c.Cluster.NodeName, c.Cluster.EtcdEmbedded = "dev", "a", true
		c.Transfer.Listen = ""
	}, "transfer.listen")
	f("public without token or advertise", func(c *Config) {
		c.Cluster.Name, c.Cluster.NodeName, c.Cluster.Etcd = "prod", "a", "http://h1:2379"
		c.HTTP.Listen, c.Transfer.Listen, c.Insecure = "0.0.0.0:8080", "0.0.0.0:7070", true
	}, "cluster.token_file", "cluster.advertise_http", "cluster.advertise_transfer")
	f("public with token and advertise", func(c *Config) {
		c.Cluster.Name, c.Cluster.NodeName, c.Cluster.Etcd = "prod", "a", "http://h1:2379"
		c.HTTP.Listen, c.Transfer.Listen, c.Insecure = "0.0.0.0:8080", "0.0.0.0:7070", true
		c.Cluster.TokenFile, c.Cluster.AdvertiseHTTP, c.Cluster.AdvertiseTransfer = "/etc/t", "10.0.0.1:8080", "10.0.0.1:7070"
	})
	f("bad knobs", func(c *Config) {
		c.Cluster.Name, c.Cluster.NodeName, c.Cluster.EtcdEmbedded = "dev", "a", true
		c.Cluster.Admit, c.Cluster.MaxReplicas, c.Cluster.LeaseTTL = "sometimes", 300, -1
	}, "cluster.admit", "cluster.max_replicas", "cluster.lease_ttl")
}

func TestClusterToken(t *testing.T) {
	c := validConfig(t)
	c.Cluster.Name = "dev"
	if tok, err := c.clusterToken(); err != nil || !strings.Contains(tok, "dev") {
		t.Fatalf("dev token %q, %v", tok, err)
	}
	p := filepath.Join(t.TempDir(), "token")
	os.WriteFile(p, []byte("short\n"), 0o600)
	c.Cluster.TokenFile = p
	if _, err := c.clusterToken(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("short token: %v", err)
	}
	os.WriteFile(p, []byte("0123456789abcdef0123\n"), 0o600)
	if tok, err := c.clusterToken(); err != nil || tok != "0123456789abcdef0123" {
		t.Fatalf("token %q, %v", tok, err)
	}
}

// A node that runs alone answers the cluster endpoints with 404 no_cluster
// and refuses replica counts above 1.
func TestClusterEndpointsAlone(t *testing.T) {
	n := startNode(t, nodeOpts{})
	h := n.api.Handler()
	for _, r := range []*http.Request{
		httptest.NewRequest("GET", "/v1/cluster", nil),
		httptest.NewRequest("POST", "/v1/cluster/query", strings.NewReader(`{"keys":[]}`)),
		httptest.NewRequest("POST", "/v1/blocks/"+strings.Repeat("ab", 32)+"/replicas", strings.NewReader(`{"count":2}`)),
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 404 || !strings.Contains(w.Body.String(), "no_cluster") {
			t.Errorf("%s %s: %d %s", r.Method, r.URL.Path, w.Code, w.Body)
		}
	}
	r := httptest.NewRequest("PUT", "/v1/blocks/"+strings.Repeat("ab", 32), strings.NewReader("x"))
	r.Header.Set(HeaderNamespace, "acme/m")
	r.Header.Set(HeaderReplicas, "2")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "needs a cluster") {
		t.Fatalf("replicas 2 alone: %d %s", w.Code, w.Body)
	}
}
