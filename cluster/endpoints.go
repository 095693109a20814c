package cluster

import "strings"

// Endpoints are etcd client URLs. As text (a flag, a YUEBING_* variable, a
// YAML scalar) they are one comma-separated list, as etcdctl takes them;
// a YAML sequence works too. Setting them replaces the list, so a flag
// given again over a file's value does not append to it.
type Endpoints []string

// String is the comma-separated list.
func (e Endpoints) String() string { return strings.Join(e, ",") }

// MarshalText writes the comma-separated list.
func (e Endpoints) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText reads a comma-separated list, dropping blanks around and
// between the URLs; whether each is a URL is for Validate to say, with the
// field's name.
func (e *Endpoints) UnmarshalText(b []byte) error {
	var out Endpoints
	for _, s := range strings.Split(string(b), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	*e = out
	return nil
}

// Set is flag.Value's (and pflag.Value's) UnmarshalText.
func (e *Endpoints) Set(s string) error { return e.UnmarshalText([]byte(s)) }

// Type names the flag's value in help text.
func (e *Endpoints) Type() string { return "urls" }
