package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/yuebing/yuebing/scheduler"
)

func validConfig(t *testing.T) Config {
	t.Helper()
	c := DefaultConfig()
	c.DataDir = t.TempDir()
	c.DRAM.Capacity = 64 << 20
	c.SSD.Capacity = 256 << 20
	c.EnsureDefaults()
	return c
}

func TestConfigDefaults(t *testing.T) {
	c := DefaultConfig()
	c.DataDir = filepath.Join(t.TempDir(), "not", "yet")
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Listen != "127.0.0.1:8080" || c.RESP.Listen != "127.0.0.1:6380" || c.Transfer.Listen != "127.0.0.1:7070" {
		t.Fatalf("listeners %+v %+v %+v", c.HTTP, c.RESP, c.Transfer)
	}
	if c.DRAM.Capacity <= 0 || c.DRAM.Capacity > 4<<30 || c.SSD.Capacity <= 0 || c.SSD.Capacity > 64<<30 {
		t.Fatalf("derived capacities dram %v ssd %v", c.DRAM.Capacity, c.SSD.Capacity)
	}
	if _, err := os.Stat(c.DataDir); !os.IsNotExist(err) {
		t.Fatal("EnsureDefaults created the data directory")
	}
}

func TestConfigValidateReportsEveryField(t *testing.T) {
	c := validConfig(t)
	c.HTTP.Listen = "0.0.0.0:8080"
	c.RESP.Listen = "nonsense"
	c.DRAM.Policy = "mru"
	c.SSD.Compression = "lz4"
	c.SSD.Capacity = 1000
	c.Limits.MaxBatchKeys = -1
	c.Limits.RequestTimeout = -time.Second
	c.Log.Level = "loud"
	c.Console.HistoryInterval = time.Millisecond
	err := c.Validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate = %v", err)
	}
	for _, want := range []string{
		"http.listen", "not a loopback address", "--insecure",
		"resp.listen", "host:port",
		"dram.policy", "lru",
		"ssd.compression", "none, s2 or zstd",
		"ssd.capacity", "limits.max_batch_keys", "limits.request_timeout", "log.level",
		"console.history_interval",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error lacks %q:\n%v", want, err)
		}
	}
	// Auth or --insecure makes a public address acceptable.
	c = validConfig(t)
	c.HTTP.Listen = "0.0.0.0:8080"
	c.Insecure = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Insecure, c.Auth.TokensFile = false, "/etc/tokens.yaml"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigLayers(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "y.yaml")
	os.WriteFile(file, []byte("http:\n  listen: 127.0.0.1:9000\ndram:\n  capacity: 2GiB\nresp:\n  listen: \"\"\nlimits:\n  request_timeout: 5s\n"), 0o600)
	c := DefaultConfig()
	if err := c.LoadFile(file); err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Listen != "127.0.0.1:9000" || c.DRAM.Capacity != 2<<30 || c.RESP.Listen != "" || c.Limits.RequestTimeout != 5*time.Second || c.Transfer.Listen != DefaultTransferListen {
		t.Fatalf("after file: %+v", c)
	}
	unknown, err := c.ApplyEnv([]string{"YUEBING_DRAM_CAPACITY=512MiB", "YUEBING_LIMITS_MAX_BATCH_KEYS=99", "YUEBING_INSECURE=true", "YUEBING_TRANSFER_LISTEN=", "YUEBING_NOPE=1", "PATH=/bin"})
	if err != nil {
		t.Fatal(err)
	}
	if c.DRAM.Capacity != 512<<20 || c.Limits.MaxBatchKeys != 99 || !c.Insecure || c.Transfer.Listen != "" || len(unknown) != 1 || unknown[0] != "YUEBING_NOPE" {
		t.Fatalf("after env: %+v, unknown %v", c, unknown)
	}
	if _, err := c.ApplyEnv([]string{"YUEBING_DRAM_CAPACITY=lots"}); err == nil || !strings.Contains(err.Error(), "YUEBING_DRAM_CAPACITY") {
		t.Fatalf("bad env value: %v", err)
	}
	os.WriteFile(file, []byte("dram:\n  capacty: 1GiB\n"), 0o600)
	if err := c.LoadFile(file); err == nil || !strings.Contains(err.Error(), "capacty") {
		t.Fatalf("typo in file: %v", err)
	}
	for _, n := range []string{"YUEBING_HTTP_LISTEN", "YUEBING_DATA_DIR", "YUEBING_AUTH_TOKENS_FILE", "YUEBING_SSD_CAPACITY"} {
		found := false
		for _, e := range EnvNames() {
			found = found || e == n
		}
		if !found {
			t.Errorf("EnvNames lacks %s", n)
		}
	}
}

func TestConfigYAMLRoundTrip(t *testing.T) {
	c := validConfig(t)
	c.DRAM.Capacity = 3<<30 + 12345
	c.Auth.TokensFile = "/etc/yuebing/tokens.yaml"
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, out, 0o600)
	var back Config
	if err := back.LoadFile(file); err != nil {
		t.Fatal(err)
	}
	back.Banner, back.Logger = c.Banner, c.Logger
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip changed the config:\n%s\n%+v\n%+v", out, back, c)
	}
}

// TestConductorConfigWhole: every knob of the conductor, the ones only
// `yuebing conductor` had before included, reaches the embedded
// conductor's scheduler.Options, and a bad one is named by its field.
func TestConductorConfigWhole(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "prefill.csv")
	if err := os.WriteFile(profile, scheduler.DefaultProfile(), 0o644); err != nil {
		t.Fatal(err)
	}
	yml := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(yml, []byte("conductor:\n  balancing_threshold: 2\n  decode_time: 7s\n  bandwidth_gbps: 400\n  policy: load\n  prefill_profile: "+profile+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := validConfig(t)
	if err := c.LoadFile(yml); err != nil {
		t.Fatal(err)
	}
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	o := c.Conductor.Options
	if o.BalancingThreshold != 2 || o.DecodeTime != 7*time.Second || o.Bandwidth != 50e9 || o.Policy != scheduler.PolicyLoad || o.Prefill == nil || o.TTFTSLO != 30*time.Second {
		t.Fatalf("options %+v", o)
	}

	for _, tc := range []struct {
		set  func(*ConductorConfig)
		want string
	}{
		{func(cc *ConductorConfig) { cc.BalancingThreshold = 0.5 }, "conductor.balancing_threshold"},
		{func(cc *ConductorConfig) { cc.DecodeTime = -time.Second }, "conductor.decode_time"},
		{func(cc *ConductorConfig) { cc.BandwidthGbps = -1 }, "conductor.bandwidth_gbps"},
		{func(cc *ConductorConfig) { cc.Policy = "fastest" }, "conductor.policy"},
		{func(cc *ConductorConfig) { cc.DecodeProfile = filepath.Join(dir, "none.csv") }, "conductor.decode_profile"},
	} {
		c := validConfig(t)
		tc.set(&c.Conductor)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want+":") {
			t.Errorf("Validate = %v, want an error naming %s", err, tc.want)
		}
	}
}

// TestConfigFlagsLayer: a flag the command line set wins over the file and
// the environment, which win over the flags' own defaults; flags write the
// same fields the file and the environment do.
func TestConfigFlagsLayer(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	os.WriteFile(file, []byte("dram:\n  capacity: 3GiB\n  policy: fifo\nssd:\n  compression: zstd\nlimits:\n  request_timeout: 5s\nrouter:\n  max_body_bytes: 4096\n"), 0o600)
	var cfg Config
	f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	flags := BindConfigFlags(f, &cfg)
	if err := f.Parse([]string{"--config", file, "--ssd-compression", "s2", "--max-batch-keys", "7", "--max-block-size", "1MiB", "--conductor=false"}); err != nil {
		t.Fatal(err)
	}
	var warn strings.Builder
	if err := flags.Load([]string{"YUEBING_DRAM_CAPACITY=2GiB", "YUEBING_SSD_COMPRESSION=none", "YUEBING_NOPE=1"}, &warn); err != nil {
		t.Fatal(err)
	}
	if cfg.DRAM.Capacity != 2<<30 || cfg.DRAM.Policy != "fifo" || cfg.SSD.Compression != "s2" || cfg.Limits.MaxBatchKeys != 7 ||
		cfg.Limits.MaxBlockSize != 1<<20 || cfg.Limits.RequestTimeout != 5*time.Second || cfg.Conductor.Enabled ||
		cfg.Router.MaxBodyBytes != 4096 || cfg.HTTP.Listen != DefaultHTTPListen {
		t.Fatalf("layered config %+v", cfg)
	}
	if !strings.Contains(warn.String(), "YUEBING_NOPE") {
		t.Errorf("no warning for an unknown variable: %q", warn.String())
	}

	f = pflag.NewFlagSet("serve", pflag.ContinueOnError)
	flags = BindConfigFlags(f, &cfg)
	if err := f.Parse([]string{"--config", filepath.Join(dir, "missing.yaml")}); err != nil {
		t.Fatal(err)
	}
	if err := flags.Load(nil, &warn); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("missing file: %v", err)
	}
	if err := f.Parse([]string{"--dram-capacity", "lots"}); err == nil || !strings.Contains(err.Error(), "dram-capacity") {
		t.Fatalf("bad size flag: %v", err)
	}
}

// TestConductorFlagsNameFields: the standalone conductor's errors name the
// flag of the field at fault, and --block-size sets the router's block
// size too, whose own default differs.
func TestConductorFlagsNameFields(t *testing.T) {
	var o ConductorOptions
	f := pflag.NewFlagSet("conductor", pflag.ContinueOnError)
	BindConductorFlags(f, &o)
	if o.Config.BlockSize != 256 || o.Router.BlockSize != 0 || o.Router.ProbeFailures != 3 {
		t.Fatalf("defaults: conductor block size %d, router's %d, probe failures %d", o.Config.BlockSize, o.Router.BlockSize, o.Router.ProbeFailures)
	}
	if err := f.Parse([]string{"--block-size", "32", "--threshold", "0.5", "--engine", "id=e0,url=http://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if o.Config.BlockSize != 32 || o.Router.BlockSize != 32 || !o.Router.Enabled() {
		t.Fatalf("after flags: conductor block size %d, router's %d, engines %v", o.Config.BlockSize, o.Router.BlockSize, o.Router.Engines)
	}
	err := RunConductor(t.Context(), o)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "--threshold:") {
		t.Fatalf("RunConductor = %v, want an error naming --threshold", err)
	}
}

// TestConfigNamesKept pins the variables (and so the YAML names) of the
// sections whose fields the packages' Options declare: users' files and
// environments keep working as the fields move.
func TestConfigNamesKept(t *testing.T) {
	names := map[string]bool{}
	for _, n := range EnvNames() {
		names[n] = true
	}
	for _, n := range strings.Fields(`YUEBING_DRAM_CAPACITY YUEBING_DRAM_EAGER_CHECKSUM YUEBING_DRAM_POLICY
		YUEBING_DRAM_PREFAULT YUEBING_DRAM_PREFAULT_BACKGROUND
		YUEBING_SSD_CAPACITY YUEBING_SSD_COMPRESSION YUEBING_SSD_NO_SYNC`) {
		if !names[n] {
			t.Errorf("%s is gone", n)
		}
	}
	var c Config
	if _, err := c.ApplyEnv([]string{"YUEBING_DRAM_PREFAULT_BACKGROUND=true", "YUEBING_DRAM_EAGER_CHECKSUM=true", "YUEBING_DRAM_POLICY=fifo"}); err != nil {
		t.Fatal(err)
	}
	if !c.DRAM.BackgroundPrefault || !c.DRAM.EagerChecksum || c.DRAM.Policy != "fifo" {
		t.Fatalf("dram section from the environment: %+v", c.DRAM)
	}
	c.DRAM.Capacity = 1 << 30
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := yaml.Unmarshal(out, &back); err != nil || back.DRAM.Capacity != 1<<30 || !back.DRAM.BackgroundPrefault || back.DRAM.Policy != "fifo" {
		t.Fatalf("dram section does not read back (%v):\n%s", err, out)
	}
	var s Config
	if _, err := s.ApplyEnv([]string{"YUEBING_SSD_COMPRESSION=zstd", "YUEBING_SSD_NO_SYNC=true", "YUEBING_SSD_CAPACITY=2GiB"}); err != nil {
		t.Fatal(err)
	}
	if s.SSD.Compression != "zstd" || !s.SSD.NoSync || s.SSD.Capacity != 2<<30 {
		t.Fatalf("ssd section from the environment: %+v", s.SSD)
	}
	if strings.Contains(string(out), "keep_page_cache") || strings.Contains(string(out), "max_wait") || strings.Contains(string(out), "logger") {
		t.Fatalf("code-only options printed:\n%s", out)
	}
}

// TestClusterDefaults pins the cluster section's defaults, which come from
// cluster.Options and replicate.Options.
func TestClusterDefaults(t *testing.T) {
	c := DefaultConfig()
	c.Cluster.Cluster = "c1"
	c.EnsureDefaults()
	cc := c.Cluster
	if cc.LeaseTTL != 10*time.Second || cc.ReportInterval != 200*time.Millisecond || cc.Admit != "second-hit" ||
		cc.MaxFetchBytes != 256<<20 || cc.MaxPending != 65536 || cc.Replication.HotHits != 32 || cc.Replication.MaxReplicas != 8 ||
		cc.Replication.Window != time.Minute || cc.EtcdEmbeddedListen != "127.0.0.1:2379" || cc.EtcdEmbeddedPeerListen != "127.0.0.1:2380" {
		t.Fatalf("cluster defaults: %+v", cc)
	}
	if cc.Logger != nil {
		t.Fatal("the section's defaults set the node's logger, which is the server's to give")
	}
	// A node that runs alone prints no cluster defaults.
	c = DefaultConfig()
	c.EnsureDefaults()
	if c.Cluster.LeaseTTL != 0 || c.Cluster.Replication.HotHits != 0 {
		t.Fatalf("defaults of a node alone: %+v", c.Cluster)
	}
}

// TestClusterNamesKept: every setting of the cluster section keeps its
// YAML name, its variable and its flag, with the meaning it had, now that
// the section is cluster.Options and replicate.Options; the token read
// from token_file is in no dump.
func TestClusterNamesKept(t *testing.T) {
	names := map[string]bool{}
	for _, n := range EnvNames() {
		names[n] = true
	}
	settings := strings.Fields(`name node_name etcd etcd_embedded etcd_embedded_listen etcd_embedded_peer_listen
		token_file advertise_http advertise_transfer advertise_resp lease_ttl report_interval resp_local_only
		admit max_fetch_bytes max_pending hot_hits max_replicas heat_window`)
	for _, n := range settings {
		if v := "YUEBING_CLUSTER_" + strings.ToUpper(n); !names[v] {
			t.Errorf("%s is gone", v)
		}
	}
	// No code-only field of the packages' Options became a setting.
	for n := range names {
		if strings.HasPrefix(n, "YUEBING_CLUSTER_") && !slices.Contains(settings, strings.ToLower(strings.TrimPrefix(n, "YUEBING_CLUSTER_"))) {
			t.Errorf("%s is new: a code-only option became a setting", n)
		}
	}

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	const token = "s3cret-cluster-token-0123456789"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "c.yaml")
	os.WriteFile(file, []byte(`cluster:
  name: prod
  node_name: cache-7
  etcd: http://h1:2379, http://h2:2379
  token_file: `+tokenFile+`
  advertise_http: 10.0.0.7:8080
  lease_ttl: 4s
  report_interval: 100ms
  admit: always
  max_fetch_bytes: 512MiB
  max_pending: 99
  hot_hits: 5
  max_replicas: 3
  heat_window: 30s
  resp_local_only: true
`), 0o600)
	var c Config
	if err := c.LoadFile(file); err != nil {
		t.Fatal(err)
	}
	cc := c.Cluster
	if cc.Cluster != "prod" || cc.NodeName != "cache-7" || !slices.Equal(cc.Endpoints, []string{"http://h1:2379", "http://h2:2379"}) ||
		cc.TokenFile != tokenFile || cc.AdvertiseHTTP != "10.0.0.7:8080" || cc.LeaseTTL != 4*time.Second ||
		cc.ReportInterval != 100*time.Millisecond || cc.Admit != "always" || cc.MaxFetchBytes != 512<<20 || cc.MaxPending != 99 ||
		cc.Replication.HotHits != 5 || cc.Replication.MaxReplicas != 3 || cc.Replication.Window != 30*time.Second || !cc.RESPLocalOnly {
		t.Fatalf("cluster section from the file: %+v", cc)
	}
	// A YAML list of endpoints reads as the comma-separated one does.
	os.WriteFile(file, []byte("cluster:\n  etcd: [http://h1:2379, http://h2:2379]\n"), 0o600)
	var l Config
	if err := l.LoadFile(file); err != nil || !slices.Equal(l.Cluster.Endpoints, cc.Endpoints) {
		t.Fatalf("etcd as a YAML list: %v %v", l.Cluster.Endpoints, err)
	}

	var e Config
	if _, err := e.ApplyEnv([]string{"YUEBING_CLUSTER_NAME=dev", "YUEBING_CLUSTER_ETCD=http://a:2379,http://b:2379",
		"YUEBING_CLUSTER_HOT_HITS=7", "YUEBING_CLUSTER_HEAT_WINDOW=2m", "YUEBING_CLUSTER_MAX_FETCH_BYTES=1GiB", "YUEBING_CLUSTER_TOKEN_FILE=/t"}); err != nil {
		t.Fatal(err)
	}
	if e.Cluster.Cluster != "dev" || !slices.Equal(e.Cluster.Endpoints, []string{"http://a:2379", "http://b:2379"}) || e.Cluster.Replication.HotHits != 7 ||
		e.Cluster.Replication.Window != 2*time.Minute || e.Cluster.MaxFetchBytes != 1<<30 || e.Cluster.TokenFile != "/t" {
		t.Fatalf("cluster section from the environment: %+v", e.Cluster)
	}
	if _, err := e.ApplyEnv([]string{"YUEBING_CLUSTER_HOT_HITS=-1"}); err == nil || !strings.Contains(err.Error(), "YUEBING_CLUSTER_HOT_HITS") {
		t.Fatalf("negative hot_hits: %v", err)
	}

	// The flags set the same fields, over the file and the environment.
	var fc Config
	f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	flags := BindConfigFlags(f, &fc)
	os.WriteFile(file, []byte("cluster:\n  name: fromfile\n  etcd: http://file:2379\n  lease_ttl: 3s\n  hot_hits: 9\n"), 0o600)
	if err := f.Parse([]string{"--config", file, "--cluster", "fromflag", "--etcd", "http://f1:2379,http://f2:2379", "--node-name", "n1",
		"--cluster-token-file", tokenFile, "--cluster-admit", "never", "--resp-local-only", "--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:3379",
		"--advertise-transfer", "10.0.0.7:7070", "--advertise-resp", "10.0.0.7:6380"}); err != nil {
		t.Fatal(err)
	}
	if err := flags.Load([]string{"YUEBING_CLUSTER_LEASE_TTL=6s"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	cc = fc.Cluster
	if cc.Cluster != "fromflag" || !slices.Equal(cc.Endpoints, []string{"http://f1:2379", "http://f2:2379"}) || cc.NodeName != "n1" ||
		cc.TokenFile != tokenFile || cc.Admit != "never" || !cc.RESPLocalOnly || !cc.EtcdEmbedded || cc.EtcdEmbeddedListen != "127.0.0.1:3379" ||
		cc.AdvertiseTransfer != "10.0.0.7:7070" || cc.AdvertiseRESP != "10.0.0.7:6380" || cc.LeaseTTL != 6*time.Second || cc.Replication.HotHits != 9 {
		t.Fatalf("cluster section from flags over file and environment: %+v", cc)
	}

	// The dump names the token file and reads back; the token is the
	// server's to read at start and is printed nowhere.
	fc.DataDir, fc.DRAM.Capacity, fc.SSD.Capacity = dir, 64<<20, 256<<20
	fc.EnsureDefaults()
	if err := fc.Validate(); err != nil {
		t.Fatal(err)
	}
	tok, err := fc.clusterToken()
	if err != nil || tok != token {
		t.Fatalf("token %q, %v", tok, err)
	}
	out, err := fc.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), token) || strings.Contains(fmt.Sprintf("%+v", fc), token) || !strings.Contains(string(out), tokenFile) {
		t.Fatalf("the dump holds the token, or does not name its file:\n%s", out)
	}
	var dump struct {
		Cluster map[string]any `yaml:"cluster"`
	}
	if err := yaml.Unmarshal(out, &dump); err != nil {
		t.Fatal(err)
	}
	for k := range dump.Cluster {
		if !slices.Contains(settings, k) {
			t.Errorf("code-only option cluster.%s printed:\n%s", k, out)
		}
	}
	var back Config
	if err := yaml.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Cluster.Endpoints, fc.Cluster.Endpoints) || back.Cluster.MaxFetchBytes != fc.Cluster.MaxFetchBytes ||
		back.Cluster.Replication.Window != fc.Cluster.Replication.Window || back.Cluster.Cluster != "fromflag" {
		t.Fatalf("cluster section does not read back:\n%s", out)
	}
}

// TestShmDefaults pins the shm section's defaults and their derivations,
// which come from staging.Options.
func TestShmDefaults(t *testing.T) {
	c := DefaultConfig()
	c.EnsureDefaults()
	s := c.Shm
	if s.MaxSessionBytes != 256<<20 || s.MaxBytes != 1<<30 || s.MaxSessions != 64 || s.MaxOwnerSessions != 16 ||
		s.MaxOwnerBytes != 512<<20 || s.MaxPending != 128 || s.HelloTimeout != 5*time.Second {
		t.Fatalf("shm defaults: %+v", s)
	}
	c = DefaultConfig()
	c.Shm.MaxSessions, c.Shm.MaxBytes, c.Shm.MaxSessionBytes = 8, 100<<20, 80<<20
	c.EnsureDefaults()
	if s := c.Shm; s.MaxOwnerSessions != 2 || s.MaxOwnerBytes != 80<<20 {
		t.Fatalf("shm per-tenant defaults derived from the totals: %+v", s)
	}
}
