// Package transfer is `yuebing bench transfer`: the transfer service's
// batched reads and writes over its transports, beside memcpy and raw TCP.
package transfer
