// Package soak is `yuebing bench soak`: real `yuebing serve` processes (and
// optionally engine simulators behind the router) under mixed load for a
// long time, killed and restarted, every value read back checked, and RSS,
// errors and latency recorded per window.
package soak
