//go:build !linux

package resp

import (
	"fmt"
	"runtime"
)

// loops stands for the event loops, which need Linux's epoll.
type loops struct{}

type loop struct{}

func newLoops(*Server, int) (*loops, error) {
	return nil, fmt.Errorf("resp: event_loop needs Linux's epoll and this is %s: turn resp.event_loop off", runtime.GOOS)
}

func (*loops) start()         {}
func (*loops) add(*conn) bool { return false }
