package router

import (
	"strings"
	"testing"
)

func TestFlagsParse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		f        Flags
		want     string
		requests int
	}{
		{"defaults", Flags{}, "", 0},
		{"set", Flags{Options: Options{Requests: 50, PromptTokens: 64}}, "", 50},
		{"quick", Flags{Options: Options{Requests: 5000}, Quick: true}, "", 200},
		{"requests", Flags{Options: Options{Requests: -1}}, "--requests and --prompt-tokens must be positive", 0},
		{"prompt", Flags{Options: Options{PromptTokens: -1}}, "--requests and --prompt-tokens must be positive", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := tc.f.Parse()
			if tc.want == "" {
				if err != nil || o.Requests != tc.requests {
					t.Fatalf("got %+v, %v; want %d requests", o, err, tc.requests)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if got := Ticks(Options{}); got != 4000 {
		t.Errorf("Ticks of the defaults = %d, want 4000", got)
	}
}
