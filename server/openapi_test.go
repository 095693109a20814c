package server

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestOpenAPIMatchesRoutes fails when a route is registered but missing
// from docs/api/openapi.yaml, or documented but not registered.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	data, err := os.ReadFile("../docs/api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	methods := []string{"get", "put", "post", "delete", "patch", "head", "options"}
	var documented []string
	for path, ops := range doc.Paths {
		for m := range ops {
			if slices.Contains(methods, m) {
				documented = append(documented, strings.ToUpper(m)+" "+path)
			}
		}
	}
	n := startNode(t, nodeOpts{conductor: true})
	param := regexp.MustCompile(`[:*]([A-Za-z_]+)`)
	var registered []string
	for _, r := range n.api.Engine().Routes() {
		registered = append(registered, r.Method+" "+param.ReplaceAllString(r.Path, "{$1}"))
	}
	slices.Sort(documented)
	slices.Sort(registered)
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in docs/api/openapi.yaml", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("docs/api/openapi.yaml documents %s, which is not a route", d)
		}
	}
}
