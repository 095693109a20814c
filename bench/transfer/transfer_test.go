package transfer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRunTransferShape runs both transports for a moment and checks the
// report has the shape DESIGN.md asks for: a baseline row and a measured
// row carrying baseline, baseline_gbps and ratio.
func TestRunTransferShape(t *testing.T) {
	for _, tc := range []Options{
		{Transport: "tcp", Op: "read", Paths: 2, SliceSize: 256 << 10},
		{Transport: "tcp", Op: "write", Paths: 1},
		{Transport: "shm", Op: "write"},
	} {
		t.Run(tc.Transport+"_"+tc.Op, func(t *testing.T) {
			tc.Threads, tc.Batch, tc.BlockSize, tc.Duration = 2, 2, 256<<10, 100*time.Millisecond
			r, err := Run(t.Context(), tc)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := r.WriteJSON(&buf); err != nil {
				t.Fatal(err)
			}
			var got struct {
				Results []map[string]any `json:"results"`
			}
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			want := 2
			if tc.Transport == "tcp" {
				want = 3 // raw_tcp, raw_tcp_crc, the transfer
			}
			if len(got.Results) != want {
				t.Fatalf("%d rows: %s", len(got.Results), buf.String())
			}
			base, row := got.Results[0], got.Results[want-1]
			if row["name"] != tc.Transport+"_"+tc.Op || row["baseline"] != base["name"] {
				t.Fatalf("rows %v", got.Results)
			}
			for _, k := range []string{"gbps", "baseline_gbps", "ratio", "p50_us", "p99_us", "requests"} {
				if v, ok := row[k].(float64); !ok || v <= 0 {
					t.Errorf("%s = %v", k, row[k])
				}
			}
			if ratio := row["gbps"].(float64) / row["baseline_gbps"].(float64); ratio != row["ratio"].(float64) {
				t.Errorf("ratio %v != gbps/baseline_gbps %v", row["ratio"], ratio)
			}
			if tc.Transport == "tcp" {
				crc := got.Results[1]
				if crc["name"] != "raw_tcp_crc" || row["crc_baseline"] != "raw_tcp_crc" || row["crc_ratio"].(float64) <= 0 ||
					row["crc_baseline_gbps"] != crc["gbps"] {
					t.Errorf("crc baseline rows %v", got.Results)
				}
			}
		})
	}
}

func TestTransferOptionsValidate(t *testing.T) {
	o := Options{Transport: "udp", Op: "copy", Threads: -1, Batch: 5000, BlockSize: -1, Paths: 17, SliceSize: -1, Duration: -1}
	err := o.Validate()
	for _, want := range []string{"transport", "op", "threads", "batch", "block size", "paths", "slice size", "duration"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
	big := (&Options{Threads: 1024, Batch: 4096, BlockSize: 1 << 20}).EnsureDefaults()
	if err := big.Validate(); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("memory bound: %v", err)
	}
}
