package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/s3"
	"github.com/yuebing/yuebing/tier/s3/s3test"
	"github.com/yuebing/yuebing/tier/tiertest"
)

func s3Config(t *testing.T, srv *s3test.Server) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.DRAM.Capacity = 1 << 20
	cfg.SSD.Capacity = 2 << 20
	cfg.S3 = s3.Options{Endpoint: srv.Endpoint, Bucket: srv.Bucket, Namespace: "server-test", Capacity: 64 << 20,
		SegmentSize: 256 << 10, FlushInterval: 50 * time.Millisecond, RequestTimeout: 500 * time.Millisecond}
	cfg.EnsureDefaults()
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	return cfg
}

// The s3 section puts the S3 tier under SSD: blocks evicted from SSD go
// to the bucket and read back from it.
func TestStoreWithS3Tier(t *testing.T) {
	srv := s3test.Start(t)
	cfg := s3Config(t, srv)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h, err := openStore(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if n := len(h.Tiers()); n != 3 || h.Tiers()[2].Name() != "s3" {
		t.Fatalf("tiers: %d, want dram, ssd, s3", n)
	}
	const n, size = 80, 100_000 // 8 MB through 1 MB of DRAM and 2 MB of SSD
	for i := range n {
		k := tiertest.Key(i)
		if _, err := h.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.Tiers()[2].Stats().Blocks < n/2 {
		if time.Now().After(deadline) {
			t.Fatalf("S3 holds %d blocks", h.Tiers()[2].Stats().Blocks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	hd, level, err := h.Get(t.Context(), tiertest.Key(0))
	if err != nil || level != 2 {
		t.Fatalf("Get of the first block: level %d, %v", level, err)
	}
	hd.Release()
}

// Bad S3 settings fail the start naming the setting, or start degraded
// when s3.degraded_ok asks for it.
func TestS3ConfigErrors(t *testing.T) {
	srv := s3test.Start(t)
	f := func(name string, mod func(*Config), want string) {
		t.Helper()
		cfg := s3Config(t, srv)
		mod(&cfg)
		err := cfg.Validate()
		if err == nil {
			var h *tier.Hierarchy
			if h, err = openStore(cfg, slog.New(slog.DiscardHandler)); err == nil {
				h.Close()
			}
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, want)
		}
		if err != nil && strings.Contains(err.Error(), srv.SecretKey) {
			t.Errorf("%s: the error shows the secret", name)
		}
	}
	f("no bucket", func(c *Config) { c.S3.Bucket = "" }, "s3.bucket is required")
	f("no capacity", func(c *Config) { c.S3.Capacity = 0 }, "s3.capacity")
	f("missing bucket", func(c *Config) { c.S3.Bucket = "absent" }, `s3.bucket "absent" does not exist`)
	f("wrong credentials", func(*Config) { t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong") }, "s3 credentials")
	f("unreachable", func(c *Config) { c.S3.Endpoint = "127.0.0.1:1" }, "s3.endpoint 127.0.0.1:1 unreachable")
	bad := filepath.Join(t.TempDir(), "creds.yaml")
	os.WriteFile(bad, []byte("access_key_id: x\n"), 0o600)
	f("credentials file", func(c *Config) { c.S3.CredentialsFile = bad }, "s3.credentials_file")

	// A credentials file is read; degraded_ok starts without the endpoint.
	good := filepath.Join(t.TempDir(), "creds.yaml")
	os.WriteFile(good, []byte("access_key_id: "+srv.AccessKey+"\nsecret_access_key: "+srv.SecretKey+"\n"), 0o600)
	cfg := s3Config(t, srv)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	cfg.S3.CredentialsFile = good
	h, err := openStore(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("with a credentials file: %v", err)
	}
	h.Close()
	cfg.S3.Endpoint = "127.0.0.1:1"
	cfg.S3.DegradedOK = true
	h, err = openStore(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("degraded_ok: %v", err)
	}
	defer h.Close()
	if hl := h.Tiers()[2].(tier.HealthReporter).Health(); !hl.Degraded {
		t.Fatal("unreachable endpoint with degraded_ok: not degraded")
	}
	// The printed configuration holds no secret.
	y, _ := cfg.YAML()
	if strings.Contains(string(y), srv.SecretKey) || !strings.Contains(string(y), "degraded_ok: true") {
		t.Fatalf("config YAML:\n%s", y)
	}
}

func TestS3ConfigFromEnvAndYAML(t *testing.T) {
	cfg := DefaultConfig()
	unknown, err := cfg.ApplyEnv([]string{"YUEBING_S3_BUCKET=kv", "YUEBING_S3_CAPACITY=2TiB", "YUEBING_S3_DEGRADED_OK=true", "YUEBING_S3_REQUEST_TIMEOUT=3s"})
	if err != nil || len(unknown) != 0 {
		t.Fatalf("ApplyEnv: %v, unknown %v", err, unknown)
	}
	if cfg.S3.Bucket != "kv" || cfg.S3.Capacity != 2<<40 || !cfg.S3.DegradedOK || cfg.S3.RequestTimeout != 3*time.Second {
		t.Fatalf("s3 section from the environment: %+v", cfg.S3)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("s3:\n  endpoint: https://s3.example.com\n  bucket: kv\n  capacity: 1TiB\n  segment_size: 32MiB\n"), 0o600)
	cfg = DefaultConfig()
	if err := cfg.LoadFile(path); err != nil {
		t.Fatal(err)
	}
	if cfg.S3.Capacity != 1<<40 || cfg.S3.SegmentSize != 32<<20 || cfg.S3.Endpoint != "https://s3.example.com" {
		t.Fatalf("s3 section from YAML: %+v", cfg.S3)
	}
}
