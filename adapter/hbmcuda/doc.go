// Package hbmcuda is adapter.Device over a real GPU through the CUDA driver
// API: the engine's paged KV pool in HBM (one cuMemAlloc cut into pages),
// host-to-device and device-to-host copies, and pinned host memory for the
// staging buffer a Load lands in (adapter.Staging) before each layer is
// uploaded.
//
// It is built only with the "cuda" build tag (and cgo), and needs no CUDA
// headers or libraries at build time: libcuda.so.1, the driver's library, is
// opened at run time, so one binary runs on any machine with an NVIDIA driver
// and fails with ErrNoDriver elsewhere. Without the tag the package is empty
// and the HBM tier uses adapter/hbmsim, the host-memory simulator.
//
// Register (GPUDirect RDMA, a NIC reading HBM) needs an RDMA NIC and
// nvidia-peermem; it answers errors.ErrUnsupported, and loads go through
// pinned staging instead.
//
//	go test -c -tags cuda -o hbmcuda.test ./adapter/hbmcuda
//	YUEBING_TEST_BINARY=$PWD/yuebing ./hbmcuda.test -test.v -test.bench .
package hbmcuda
