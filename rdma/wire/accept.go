package wire

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/yuebing/yuebing/rdma"
)

// Accept returns the next connection of ln that gets one of slots (a
// semaphore the caller releases when the connection ends), or nil once ctx
// is done. A connection past the limit is told ErrBusy and closed. Accept
// errors (out of descriptors and the like) are logged and retried after a
// pause instead of spinning, as net/http does.
func Accept(ctx context.Context, ln net.Listener, slots chan struct{}, log *slog.Logger) net.Conn {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Warn("transfer accept", "err", err)
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		select {
		case slots <- struct{}{}:
			return nc
		default:
			nc.SetWriteDeadline(time.Now().Add(time.Second))
			WriteError(nc, Version, 0, fmt.Errorf("%w: connection limit %d reached", rdma.ErrBusy, cap(slots)))
			nc.Close()
		}
	}
}
