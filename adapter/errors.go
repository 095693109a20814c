package adapter

import "errors"

var (
	// ErrInvalid reports a bad argument: an invalid layout, a layer out of
	// range, a nil client.
	ErrInvalid = errors.New("adapter: invalid argument")
	// ErrClosed reports a call on a closed Connector.
	ErrClosed = errors.New("adapter: closed")
	// ErrShortLoad reports a layer that could not be loaded whole: a block
	// missing on the server, a checksum mismatch, a node gone. The layer's
	// valid block count says how much of it can be used.
	ErrShortLoad = errors.New("adapter: load cut short")
	// ErrDeviceFull reports a device with no free pages.
	ErrDeviceFull = errors.New("adapter: device memory full")
)
