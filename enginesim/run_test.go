package enginesim

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func runFlags(t *testing.T, args ...string) RunOptions {
	t.Helper()
	var o RunOptions
	f := pflag.NewFlagSet("engine-sim", pflag.ContinueOnError)
	BindFlags(f, &o)
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestRunOptionsValidate: every bad flag is reported at once, each by its
// name.
func TestRunOptionsValidate(t *testing.T) {
	if d := runFlags(t); d.Validate() != nil {
		err := d.Validate()
		t.Fatalf("defaults: %v", err)
	}
	o := runFlags(t, "--pool-blocks", "0", "--time-scale", "0", "--layout", "gpt-9", "--save-staging", "lots", "--kv-replay", "tcp://127.0.0.1:0")
	err := o.Validate()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate = %v, want ErrInvalid", err)
	}
	for _, flag := range []string{"--pool-blocks", "--time-scale", "--layout", "--save-staging", "--kv-replay"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("Validate = %v, lacks %s", err, flag)
		}
	}
}

// TestRun serves a completion on the address its banner names and stops
// cleanly when its context ends.
func TestRun(t *testing.T) {
	o := runFlags(t, "--listen", "127.0.0.1:0", "--block-tokens", "16", "--time-scale", "0.001")
	pr, pw := io.Pipe()
	o.Banner = pw
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o); pw.Close() }()
	var url string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "http" {
			url = f[1]
		}
		if strings.TrimSpace(sc.Text()) == "ready" {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		cancel()
		t.Fatalf("no http line in the banner: %v", <-done)
	}
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17],"max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"engine-sim"`) {
		t.Fatalf("completion: %d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
}
