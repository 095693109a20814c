package hbmsim

import (
	"testing"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/adapter/devicetest"
)

func TestConformance(t *testing.T) {
	devicetest.Run(t, func(t *testing.T, pageBytes, pages int) adapter.Device {
		d, err := New(Options{PageBytes: pageBytes, Pages: pages})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	})
}
