// Package devicetest is the conformance suite every adapter.Device passes:
// the host-memory simulator (adapter/hbmsim) on every machine, the CUDA
// device (adapter/hbmcuda, build tag "cuda") on a machine with a GPU. What
// the HBM tier relies on is written here once, so a new device is checked
// against the same contract.
package devicetest
