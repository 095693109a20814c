package ssd

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/tiertest"
)

const (
	crashDirEnv  = "YUEBING_SSD_CRASH_DIR"
	crashBaseEnv = "YUEBING_SSD_CRASH_BASE"
)

// TestCrashDurability runs a child process that writes blocks with four
// goroutines and prints each key as its Put is acknowledged, kills it with
// SIGKILL mid-stream, and reopens the tier: every acknowledged key must be
// listed, and every listed key must read back with the right bytes and a
// valid checksum. Three rounds on one directory also exercise recovery of a
// tier that was itself recovered.
func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the crash test in -short mode")
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(rand.Uint64(), 0))
	acked := map[block.Key]int{}
	for round := range 3 {
		killAfter := 20 + r.IntN(150)
		got := runCrashChild(t, dir, round*1_000_000, killAfter)
		if len(got) < killAfter {
			t.Fatalf("round %d: child acknowledged only %d puts", round, len(got))
		}
		for k, size := range got {
			acked[k] = size
		}

		s, err := Open(Options{Dir: dir, Capacity: 256 << 20, SegmentSize: 1 << 20})
		if err != nil {
			t.Fatalf("round %d: reopening after SIGKILL: %v", round, err)
		}
		listed := map[block.Key]tier.BlockInfo{}
		s.Range(func(k block.Key, info tier.BlockInfo) bool {
			listed[k] = info
			return true
		})
		for k, size := range acked {
			info, ok := listed[k]
			if !ok {
				t.Fatalf("round %d: acknowledged block %v (%d bytes) is not listed after the crash", round, k, size)
			}
			if info.Size != int64(size) {
				t.Fatalf("round %d: block %v listed with %d bytes, acknowledged %d", round, k, info.Size, size)
			}
		}
		for k, info := range listed {
			h, err := s.Get(t.Context(), k)
			if err != nil {
				t.Fatalf("round %d: listed block %v does not read: %v", round, k, err)
			}
			want := tiertest.Value(k, int(info.Size))
			if string(h.Bytes()) != string(want) || h.Checksum() != block.Checksum(want) {
				t.Fatalf("round %d: listed block %v reads back wrong", round, k)
			}
			h.Release()
		}
		t.Logf("round %d: %d acknowledged before the kill, %d listed after", round, len(got), len(listed))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// runCrashChild starts the child, reads its acknowledgements and kills it
// after killAfter of them. It returns every key acknowledged before the kill.
func runCrashChild(t *testing.T, dir string, base, killAfter int) map[block.Key]int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashBaseEnv+"="+strconv.Itoa(base))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[block.Key]int{}
	sc := bufio.NewScanner(out)
	killed := false
	deadline := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "ack" {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		size, _ := strconv.Atoi(f[2])
		acked[tiertest.Key(n)] = size
		if len(acked) >= killAfter && !killed {
			cmd.Process.Kill() // SIGKILL: no chance to flush or close
			killed = true
		}
	}
	cmd.Wait()
	if !killed {
		t.Fatalf("child exited before it was killed, after %d acks", len(acked))
	}
	return acked
}

// TestCrashChild is the writer process of TestCrashDurability.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run by TestCrashDurability")
	}
	base, _ := strconv.Atoi(os.Getenv(crashBaseEnv))
	s, err := Open(Options{Dir: dir, Capacity: 256 << 20, SegmentSize: 1 << 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(base+g), 5))
			for i := 0; ; i++ {
				n := base + g*100_000 + i
				k := tiertest.Key(n)
				size := 1 + r.IntN(64<<10)
				if err := s.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{}); err != nil {
					fmt.Fprintln(os.Stderr, "child put:", err)
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "ack %d %d\n", n, size)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
