//go:build !linux

package resp

import "flag"

var eventLoop = flag.Bool("resp.loop", false, "serve the tests' connections from event loops (Linux only)")
