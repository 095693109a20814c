package demo

import (
	"errors"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/bench/benchtest"
)

func TestFlagsParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Flags
		want []string
		not  string
	}{
		{"ok", Flags{Options{Engines: 2, BlockSize: 16}}, nil, ""},
		{"zero engines", Flags{Options{Engines: 0, BlockSize: 16}}, []string{"--engines 0 and --block-size 16 must be positive"}, "invalid"},
		{"negative block size", Flags{Options{Engines: 2, BlockSize: -1}}, []string{"--engines 2 and --block-size -1 must be positive"}, "invalid"},
		{"too many engines", Flags{Options{Engines: 17, BlockSize: 16}}, []string{"engines 17: want 1 to 16"}, "must be positive"},
		{"all at once", Flags{Options{Engines: -3, BlockSize: 15}}, []string{"--engines -3 and --block-size 15 must be positive", "block size"}, "engines -3:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := tc.f.Parse()
			if tc.want == nil {
				if err != nil || o != tc.f.Options {
					t.Fatalf("got %+v, %v; want the options as given", o, err)
				}
				return
			}
			benchtest.WantErrors(t, err, tc.want...)
			if tc.not != "" && strings.Contains(err.Error(), tc.not) {
				t.Errorf("error %q has %q", err, tc.not)
			}
			if strings.Contains(tc.want[len(tc.want)-1], "engines 17") && !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}
