package policy

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the eviction-order scripts in testdata/, one file per
// policy (the file name is the policy name; classed_NAME is a Classed
// policy of three classes over NAME). Commands:
//
//	new capacity=N                   start an empty policy
//	add a b c [size=N] [chain]       add keys; with chain, each key's parent
//	    [class=N]                    is the key before it (and the first's is
//	                                 parent=K when given); class for Classed
//	access a b                       hits, in order
//	remove a                         the owner deletes keys
//	evict [n=N] [pinned=a,b]         evict N keys (default 1), skipping pins
//	drain                            evict everything, printing the order
//
// Every command prints the keys evicted, or "none", and ends with len=N.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		var p Policy[string]
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "new" && p == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			var out []string
			switch d.Cmd {
			case "new":
				var capacity int64 = 10
				if d.HasArg("capacity") {
					d.ScanArgs(t, "capacity", &capacity)
				}
				var err error
				if inner, ok := strings.CutPrefix(name, "classed_"); ok {
					p, err = NewClassed[string](inner, capacity, 3)
				} else {
					p, err = New[string](name, capacity)
				}
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
			case "add":
				size := int64(1)
				if d.HasArg("size") {
					d.ScanArgs(t, "size", &size)
				}
				parent, hasParent := "", false
				if d.HasArg("parent") {
					d.ScanArgs(t, "parent", &parent)
					hasParent = true
				}
				class := 0
				if d.HasArg("class") {
					d.ScanArgs(t, "class", &class)
				}
				for _, k := range keys(d) {
					p.Add(k, Info[string]{Size: size, Parent: parent, HasParent: hasParent, Class: class})
					if d.HasArg("chain") {
						parent, hasParent = k, true
					}
				}
			case "access":
				for _, k := range keys(d) {
					p.Access(k)
				}
			case "remove":
				for _, k := range keys(d) {
					p.Remove(k)
				}
			case "evict", "drain":
				n := 1
				if d.HasArg("n") {
					d.ScanArgs(t, "n", &n)
				}
				pinned := map[string]bool{}
				if d.HasArg("pinned") {
					var ks []string
					d.ScanArgs(t, "pinned", &ks)
					for _, k := range ks {
						pinned[k] = true
					}
				}
				for i := 0; d.Cmd == "drain" || i < n; i++ {
					k, ok := p.Evict(func(k string) bool { return !pinned[k] })
					if !ok {
						if d.Cmd == "evict" {
							out = append(out, "none")
						}
						break
					}
					out = append(out, k)
				}
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			if len(out) == 0 {
				out = []string{"ok"}
			}
			return fmt.Sprintf("%s\nlen=%d\n", strings.Join(out, " "), p.Len())
		})
	})
}

// keys returns the command's bare arguments: the keys.
func keys(d *datadriven.TestData) []string {
	var ks []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 && a.Key != "chain" {
			ks = append(ks, a.Key)
		}
	}
	return ks
}
