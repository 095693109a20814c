// Package cluster is `yuebing bench cluster`: a trace replayed against a
// cluster of nodes (in process or as child processes), counting local and
// remote hits, with remote GET and replicated PUT costs beside a single
// node's.
package cluster
