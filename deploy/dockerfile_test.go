package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case
	args string
}

// parseDockerfile splits a Dockerfile into instructions: comments and blank
// lines dropped, lines ending in a backslash joined to the next.
func parseDockerfile(text string) []instruction {
	var out []instruction
	var cur strings.Builder
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// stage is one FROM and what follows it.
type stage struct {
	from, name string
	ins        []instruction
}

func stages(ins []instruction) []stage {
	var ss []stage
	for _, in := range ins {
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			s := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			ss = append(ss, s)
			continue
		}
		if len(ss) > 0 {
			ss[len(ss)-1].ins = append(ss[len(ss)-1].ins, in)
		}
	}
	return ss
}

func readDockerfile(t *testing.T) ([]instruction, []stage) {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	ins := parseDockerfile(string(data))
	return ins, stages(ins)
}

func TestDockerfile(t *testing.T) {
	ins, ss := readDockerfile(t)
	if len(ss) < 2 {
		t.Fatalf("%d stages, want a build stage and a final one", len(ss))
	}
	build, final := ss[0], ss[len(ss)-1]
	if !strings.HasPrefix(build.from, "golang:") || build.name == "" {
		t.Errorf("first stage FROM %s AS %q, want a named golang stage", build.from, build.name)
	}

	// The build stage: static, reproducible.
	cgoOff, built := false, false
	for _, in := range build.ins {
		switch in.cmd {
		case "ENV":
			if slices.Contains(strings.Fields(in.args), "CGO_ENABLED=0") {
				cgoOff = true
			}
		case "RUN":
			if strings.Contains(in.args, "go build") {
				built = true
				if !cgoOff && !strings.Contains(in.args, "CGO_ENABLED=0") {
					t.Error("go build runs without CGO_ENABLED=0: the binary would not be static")
				}
				for _, want := range []string{"-trimpath", "./cmd/yuebing"} {
					if !strings.Contains(in.args, want) {
						t.Errorf("go build lacks %s: %s", want, in.args)
					}
				}
			}
		}
	}
	if !built {
		t.Error("the build stage runs no go build")
	}

	// The final stage: no shell, no package manager, a non-root user.
	if !strings.Contains(final.from, "distroless/static") && final.from != "scratch" {
		t.Errorf("final stage FROM %s, want distroless static or scratch", final.from)
	}
	var user, volume, entrypoint string
	var exposed []string
	copied := false
	for _, in := range final.ins {
		switch in.cmd {
		case "USER":
			user = in.args
		case "VOLUME":
			volume = in.args
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			if strings.Contains(in.args, "--from="+build.name) {
				copied = true
			}
		}
	}
	if !copied {
		t.Errorf("the final stage copies nothing from stage %s", build.name)
	}
	uid, gid, hasGroup := strings.Cut(user, ":")
	ids := []string{uid}
	if hasGroup {
		ids = append(ids, gid)
	}
	for _, id := range ids {
		if n, err := strconv.Atoi(id); err != nil || n == 0 {
			t.Errorf("USER %q: want a numeric non-root user (Kubernetes' runAsNonRoot checks a number)", user)
		}
	}
	if volume != "/data" && volume != `["/data"]` {
		t.Errorf("VOLUME %q, want /data", volume)
	}
	for _, p := range []string{"8080", "6380", "7070"} {
		if !slices.Contains(exposed, p) {
			t.Errorf("EXPOSE lacks %s", p)
		}
	}
	var ep []string
	if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || len(ep) != 1 || !strings.HasSuffix(ep[0], "/yuebing") {
		t.Errorf("ENTRYPOINT %s, want the exec form of the yuebing binary", entrypoint)
	}
	for _, in := range ins {
		if in.cmd == "HEALTHCHECK" {
			t.Error("HEALTHCHECK: Kubernetes ignores it and probes /healthz and /readyz instead")
		}
	}
}

// TestDockerfileGoVersion keeps the builder's Go on go.mod's version.
func TestDockerfileGoVersion(t *testing.T) {
	ins, _ := readDockerfile(t)
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("no go directive in go.mod")
	}
	for _, in := range ins {
		if v, ok := strings.CutPrefix(in.args, "GO_VERSION="); ok && in.cmd == "ARG" {
			if v != string(m[1]) {
				t.Errorf("ARG GO_VERSION=%s, go.mod says go %s", v, m[1])
			}
			return
		}
	}
	t.Error("no ARG GO_VERSION")
}

func TestParseDockerfile(t *testing.T) {
	got := parseDockerfile("# c\nFROM a AS b\n\nRUN x \\\n  y\nuser 1\n")
	want := []instruction{{"FROM", "a AS b"}, {"RUN", "x  y"}, {"USER", "1"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
