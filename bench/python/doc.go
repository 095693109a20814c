// Package python is `yuebing bench python`: the Python client's zero-copy
// calls against a raw Python socket. Run serves a node in this process
// (DRAM and SSD tiers in a data directory, shared memory on) and runs the
// Python package's own benchmark against it, `python3 -m yuebing.bench`,
// which times MooncakeDistributedStore's get_into and put_from over shared
// memory and over the socket beside a raw socket moving the same bytes.
// The rows are the Python benchmark's, passed through as it prints them.
//
//	err := python.Run(ctx, python.Options{PythonDir: "python", Quick: true,
//		Stdout: os.Stdout, Stderr: os.Stderr})
//
// See docs/python.md for the client and docs/benchmarks.md for figures.
package python
