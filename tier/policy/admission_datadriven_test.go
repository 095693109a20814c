package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestAdmissionDataDriven runs the admission scripts in
// testdata_admission/ (kept apart from testdata/, whose every file is an
// eviction policy's script). Commands:
//
//	new name=P [ghost=N]      start an empty admission policy
//	put a b c [parent=K]      puts in order, each after the one before it
//	                          (the first after K when given)
//	extend a                  a put after a is about to happen
//	access a                  reads
//	admit a [held=b,c]        ask whether evicted a is written below, with
//	                          only the held keys in some tier
//	hit a / drop a            a read from below / the lower tier lost a
//	forget a                  no tier holds a any more
//
// Every command prints its answers, if any, and the known block count.
func TestAdmissionDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata_admission", func(t *testing.T, path string) {
		var a *Admission[string]
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "new" && a == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			keys := func() []string {
				var ks []string
				for _, arg := range d.CmdArgs {
					if len(arg.Vals) == 0 {
						ks = append(ks, arg.Key)
					}
				}
				return ks
			}
			var out []string
			switch d.Cmd {
			case "new":
				var name string
				ghost := 0
				d.ScanArgs(t, "name", &name)
				if d.HasArg("ghost") {
					d.ScanArgs(t, "ghost", &ghost)
				}
				var err error
				if a, err = NewAdmission[string](name, ghost); err != nil {
					return err.Error()
				}
			case "put":
				parent, has := "", false
				if d.HasArg("parent") {
					d.ScanArgs(t, "parent", &parent)
					has = true
				}
				for _, k := range keys() {
					a.Put(k, parent, has)
					parent, has = k, true
				}
			case "extend":
				for _, k := range keys() {
					a.Extend(k)
				}
			case "access":
				for _, k := range keys() {
					a.Access(k)
				}
			case "admit":
				held := map[string]bool{}
				if d.HasArg("held") {
					var hs []string
					d.ScanArgs(t, "held", &hs)
					for _, h := range hs {
						held[h] = true
					}
				}
				for _, k := range keys() {
					verdict := "refuse"
					if a.Admit(k, func(k string) bool { return held[k] }) {
						verdict = "write"
					}
					out = append(out, k+": "+verdict)
				}
			case "hit", "drop", "forget":
				for _, k := range keys() {
					map[string]func(string){"hit": a.HitBelow, "drop": a.Dropped, "forget": a.Forget}[d.Cmd](k)
				}
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			out = append(out, fmt.Sprintf("len=%d", a.Len()))
			return strings.Join(out, "\n") + "\n"
		})
	})
}
