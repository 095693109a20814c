package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/yuebing/yuebing/block"
)

// TestClusterRelayHolderDies reads a large block on a node that does not
// hold it (relayed from the holder without a copy) and kills the holder
// mid-answer: the client gets a body cut short of its Content-Length and an
// error, every byte it did get right, never a complete wrong block. A
// relayed answer carries the holder's checksum and name.
func TestClusterRelayHolderDies(t *testing.T) {
	root := t.TempDir()
	big := []string{"--dram-capacity", "128MiB", "--max-block-size", "64MiB"}
	a := serveCluster(t, "a", filepath.Join(root, "a"), append(big, "--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0")...)
	b := serveCluster(t, "b", filepath.Join(root, "b"), append(big, "--etcd", a.banner["etcd"], "--cluster-admit", "never")...)
	waitCluster(t, a, b)

	small, smallData := chainKeys(t, 1, 61)[0], testData(61, 300<<10)
	a.put(t, small, smallData, 0)
	for range 2 { // admit never: every read is relayed, none kept
		if st, src := b.get(t, small, smallData); st != 200 || src != "a" {
			t.Fatalf("GET on b of a block on a: %d from %q", st, src)
		}
	}

	// The relayed bytes count in the node's response bytes as any others.
	_, m, _ := b.do(t, "GET", "/metrics", nil, nil)
	want := fmt.Sprintf(`yuebing_http_response_bytes_total{route="/v1/blocks/:key"} %d`, 2*len(smallData))
	for _, want := range []string{want, "yuebing_cluster_relayed_total 2\n", "yuebing_transfer_blocks_read_total 2\n"} {
		if !bytes.Contains(m, []byte(want)) {
			t.Errorf("metrics of b lack %s", want)
		}
	}

	const size = 48 << 20
	k, data := chainKeys(t, 1, 62)[0], testData(62, size)
	a.put(t, k, data, 0)
	req, err := http.NewRequestWithContext(t.Context(), "GET", b.url+"/v1/blocks/"+k.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != size || resp.Header.Get("X-Yuebing-Source") != "a" ||
		resp.Header.Get("X-Yuebing-Crc32c") != fmt.Sprintf("%08x", block.Checksum(data)) {
		t.Fatalf("relayed answer: %d, length %d, source %q, crc %q", resp.StatusCode, resp.ContentLength,
			resp.Header.Get("X-Yuebing-Source"), resp.Header.Get("X-Yuebing-Crc32c"))
	}
	head := make([]byte, 1<<20)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	a.kill(t)
	rest, err := io.ReadAll(resp.Body)
	got := append(head, rest...)
	if err == nil || len(got) >= size {
		t.Fatalf("holder killed mid-block: read %d of %d bytes, err %v; want an error and a short body", len(got), size, err)
	}
	if !bytes.Equal(got, data[:len(got)]) {
		t.Fatalf("the %d bytes that did arrive differ from the block's", len(got))
	}
	t.Logf("holder killed after the client read 1 MiB: %d of %d MiB arrived, then %v", len(got)>>20, size>>20, err)
}
