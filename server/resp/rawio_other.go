//go:build !linux

package resp

import "net"

// rawSock is empty where the connection's socket is used through net.Conn.
type rawSock struct{}

func (c *conn) readSock(p []byte) (int, error) { return c.nc.Read(p) }

func (c *conn) writeSock(bufs [][]byte) (int64, error) {
	nb := net.Buffers(bufs)
	return nb.WriteTo(c.nc)
}
