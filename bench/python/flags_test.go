package python

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/yuebing/yuebing/bench/benchtest"
)

// pkgDir makes a directory that looks like the Python package to Parse.
func pkgDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "yuebing"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "yuebing", "bench.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestFlagsParse(t *testing.T) {
	dir := pkgDir(t)
	for _, tc := range []struct {
		name string
		edit func(*Flags)
		want []string
	}{
		{"ok", func(*Flags) {}, nil},
		{"the repository's package", func(f *Flags) { f.PythonDir = "../../python" }, nil},
		{"no package", func(f *Flags) { f.PythonDir = t.TempDir() }, []string{"has no yuebing package (run from the repository root or point it at python/)"}},
		{"rounds", func(f *Flags) { f.Rounds = -1 }, []string{"--rounds must not be negative"}},
		{"dram small", func(f *Flags) { f.DRAMCapacity = "32MiB" }, []string{`--dram-capacity: "32MiB": want a size like 512MiB, at least 64MiB`}},
		{"dram bad", func(f *Flags) { f.DRAMCapacity = "much" }, []string{`--dram-capacity: "much"`}},
		{"all at once", func(f *Flags) { f.PythonDir, f.Rounds, f.DRAMCapacity = "/nonexistent", -2, "" }, []string{
			"--python-dir: /nonexistent has no yuebing package", "--rounds", "--dram-capacity"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Flags{Options: Options{PythonDir: dir}, DRAMCapacity: "512MiB"}
			tc.edit(&f)
			o, err := f.Parse()
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if o.DRAMCapacity != 512<<20 {
					t.Fatalf("options %+v", o)
				}
				return
			}
			benchtest.WantErrors(t, err, tc.want...)
		})
	}
}
