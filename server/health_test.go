package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/ssd"
	"github.com/yuebing/yuebing/tier/ssd/ssdtest"
)

// TestDegradedSSDOverHTTP serves a node whose SSD sits on a simulated
// failing disk. While the disk fails writes, puts still succeed (into
// DRAM), /healthz, /readyz and /metrics say the SSD tier is degraded and
// why, and blocks stored on SSD before the fault are served with the right
// bytes. A read the device fails is a 503, not a lost block. Once the disk
// recovers, so does the tier, with no restart.
func TestDegradedSSDOverHTTP(t *testing.T) {
	dir := t.TempDir()
	disk := ssdtest.NewDisk(5)
	quiet := slog.New(slog.DiscardHandler)
	d, err := dram.New(dram.Options{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssd.Open(ssd.Options{
		Dir: filepath.Join(dir, "ssd"), Capacity: 64 << 20,
		Files: disk.Files(), IndexFS: disk.Index(),
		ProbeInterval: time.Millisecond, MaxProbeInterval: 10 * time.Millisecond, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := tier.NewHierarchy([]tier.Tier{d, s}, tier.HierarchyOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	api, err := NewAPI(APIOptions{Store: store, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	c, err := client.New(srv.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	const size = 64 << 10
	keys := chain(t, nsAlpha, 60, 1)
	for i, k := range keys[:30] { // twice what DRAM holds: most go to SSD
		if _, err := c.Put(ctx, nsAlpha, k, payload(uint64(i), size)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Which blocks live only on SSD: those reads go to the device.
	var onSSD []int
	for i, k := range keys[:30] {
		if e, ok := store.Lookup(k); ok && !e.Tiers.Has(0) && e.Tiers.Has(1) {
			onSSD = append(onSSD, i)
		}
	}
	if len(onSSD) == 0 {
		t.Fatal("no block is on SSD only")
	}

	disk.Inject(ssdtest.Fault{Op: ssdtest.OpWrite})
	for i, k := range keys[30:] {
		if _, err := c.Put(ctx, nsAlpha, k, payload(uint64(30+i), size)); err != nil {
			t.Fatalf("put while the SSD fails writes: %v", err)
		}
	}
	waitFor(t, "the SSD tier to degrade", func() bool { return s.Health().Degraded })
	for _, path := range []string{"/healthz", "/readyz"} {
		status, body := getHealth(t, srv.URL+path)
		ts := body.Tiers["ssd"]
		if status != http.StatusOK || body.Status != "degraded" || ts.Status != "degraded" || ts.Cause != "write" || ts.Reason == "" {
			t.Fatalf("%s while degraded: %d %+v", path, status, body)
		}
	}
	m := scrape(t, srv.URL)
	for _, want := range []string{
		`yuebing_tier_degraded{tier="ssd"} 1`,
		`yuebing_tier_degraded_cause{cause="write",tier="ssd"} 1`,
		`yuebing_tier_degraded{tier="dram"}`, // absent: DRAM reports no health
	} {
		has := strings.Contains(m, want)
		if has != !strings.Contains(want, "dram") {
			t.Fatalf("metrics: %q present = %v:\n%s", want, has, grepLines(m, "yuebing_tier_degraded"))
		}
	}
	if !strings.Contains(m, `yuebing_tier_io_errors_total{op="write",tier="ssd"}`) {
		t.Fatalf("metrics lack the write errors:\n%s", grepLines(m, "io_errors"))
	}
	if len(onSSD) < 2 {
		t.Fatalf("only %d blocks on SSD only", len(onSSD))
	}
	// The last one is kept unread for the read fault below: a read
	// could promote it to DRAM.
	for _, i := range onSSD[:len(onSSD)-1] {
		got, _, err := c.Get(ctx, keys[i], client.GetOptions{})
		if err != nil {
			t.Fatalf("block %d on SSD while degraded: %v", i, err)
		}
		if !bytes.Equal(got, payload(uint64(i), size)) {
			t.Fatalf("block %d on SSD reads back wrong bytes", i)
		}
	}

	disk.Clear()
	waitFor(t, "the SSD tier to recover", func() bool { return !s.Health().Degraded })

	// A read the device fails once: 503, and the block is still there.
	i := onSSD[len(onSSD)-1]
	if e, ok := store.Lookup(keys[i]); !ok || e.Tiers.Has(0) {
		t.Fatalf("block %d left the SSD tier: %+v", i, e)
	}
	disk.Inject(ssdtest.Fault{Op: ssdtest.OpRead, Count: 1})
	_, _, err = c.Get(ctx, keys[i], client.GetOptions{})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusServiceUnavailable || ce.Code != "unavailable" {
		t.Fatalf("read the device failed: %v, want 503 unavailable", err)
	}
	got, _, err := c.Get(ctx, keys[i], client.GetOptions{})
	if err != nil || !bytes.Equal(got, payload(uint64(i), size)) {
		t.Fatalf("block after a failed read: %v", err)
	}
	waitFor(t, "the SSD tier to recover", func() bool { return !s.Health().Degraded })
	status, body := getHealth(t, srv.URL+"/healthz")
	if status != http.StatusOK || body.Status != "ok" || body.Tiers["ssd"].Status != "ok" {
		t.Fatalf("/healthz after recovery: %d %+v", status, body)
	}
	m = scrape(t, srv.URL)
	if !strings.Contains(m, `yuebing_tier_degraded{tier="ssd"} 0`) || !strings.Contains(m, `yuebing_tier_recoveries_total{tier="ssd"} 2`) {
		t.Fatalf("metrics after recovery:\n%s", grepLines(m, "yuebing_tier_"))
	}
}

func getHealth(t *testing.T, url string) (int, healthBody) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b healthBody
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode, b
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// waitFor polls cond; the deadline guards against a hang, it times
// nothing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
