package cluster

import (
	"slices"
	"testing"
)

func TestEndpointsText(t *testing.T) {
	f := func(in string, want ...string) {
		t.Helper()
		e := Endpoints{"http://old:2379"}
		if err := e.Set(in); err != nil {
			t.Fatalf("Set(%q): %v", in, err)
		}
		if !slices.Equal(e, want) {
			t.Fatalf("Set(%q) = %q, want %q (a set replaces the list)", in, []string(e), want)
		}
		text, err := e.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Endpoints
		if err := back.UnmarshalText(text); err != nil || !slices.Equal(back, e) {
			t.Fatalf("%q does not read back: %q, %v", text, []string(back), err)
		}
	}
	f("")
	f(" , ,")
	f("http://h1:2379", "http://h1:2379")
	f("http://h1:2379, http://h2:2379,,", "http://h1:2379", "http://h2:2379")
}
