package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/yuebing/yuebing/server"
)

// deployedCommand is a yuebing command line the deploy/ files run.
type deployedCommand struct {
	where string
	args  []string
}

// deployedCommands returns the args of every yuebing container in
// deploy/kubernetes and the Dockerfile's default CMD, with the kubelet's
// $(VAR) expansions replaced by sample values.
func deployedCommands(t *testing.T) []deployedCommand {
	t.Helper()
	sample := map[string]string{"POD_NAME": "yuebing-0", "POD_IP": "10.0.0.7"}
	expand := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var out []deployedCommand
	files, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc any
			if err := dec.Decode(&doc); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			walkContainers(doc, func(c map[string]any) {
				image, _ := c["image"].(string)
				if !strings.Contains(image, "/yuebing/yuebing") {
					return
				}
				var args []string
				raw, _ := c["args"].([]any)
				for _, a := range raw {
					s, _ := a.(string)
					args = append(args, expand.ReplaceAllStringFunc(s, func(m string) string {
						if v, ok := sample[m[2:len(m)-1]]; ok {
							return v
						}
						return strings.Repeat("x", 32) // a secret's value
					}))
				}
				out = append(out, deployedCommand{where: filepath.Base(f) + " container " + c["name"].(string), args: args})
			})
		}
	}
	data, err := os.ReadFile("../../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "CMD "); ok {
			var args []string
			if err := json.Unmarshal([]byte(rest), &args); err != nil {
				t.Fatalf("Dockerfile CMD: %v", err)
			}
			out = append(out, deployedCommand{where: "Dockerfile CMD", args: args})
		}
	}
	return out
}

func walkContainers(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == "containers" || k == "initContainers" {
				if cs, ok := x.([]any); ok {
					for _, c := range cs {
						if m, ok := c.(map[string]any); ok {
							f(m)
						}
					}
				}
				continue
			}
			walkContainers(x, f)
		}
	case []any:
		for _, x := range v {
			walkContainers(x, f)
		}
	}
}

// TestDeployedCommandLines parses every command line of deploy/ with the
// real commands' flags, so a flag renamed or removed fails here; a node's
// line must also make a valid configuration.
func TestDeployedCommandLines(t *testing.T) {
	cmds := deployedCommands(t)
	seen := map[string]bool{}
	for _, dc := range cmds {
		if len(dc.args) == 0 {
			t.Errorf("%s: no args", dc.where)
			continue
		}
		seen[dc.args[0]] = true
		var cmd *cobra.Command
		var cfg server.Config
		var flags *server.ConfigFlags
		switch dc.args[0] {
		case "serve":
			cmd = &cobra.Command{Use: "serve"}
			flags = server.BindConfigFlags(cmd.Flags(), &cfg)
		case "conductor":
			cmd = newConductorCmd()
		default:
			t.Errorf("%s: runs %q, want serve or conductor", dc.where, dc.args[0])
			continue
		}
		if err := cmd.ParseFlags(dc.args[1:]); err != nil {
			t.Errorf("%s: %v", dc.where, err)
			continue
		}
		if rest := cmd.Flags().Args(); len(rest) > 0 {
			t.Errorf("%s: arguments that are no flags: %q", dc.where, rest)
		}
		if dc.args[0] == "serve" {
			err := flags.Load(nil, io.Discard)
			if err == nil {
				cfg.EnsureDefaults()
				err = cfg.Validate()
			}
			if err != nil {
				t.Errorf("%s: %v", dc.where, err)
			}
		}
	}
	if !seen["serve"] || !seen["conductor"] {
		t.Errorf("deploy/ runs %v, want both serve and conductor", seen)
	}
}
