// Package console is the operator console of a node: a few static pages
// served at /ui/ that draw the node's JSON endpoints (overview, cluster,
// keys, conductor) in a browser, and the short history of counters the
// overview charts.
//
// The pages are embedded in the binary: nothing is built or fetched when
// the node runs, and no request leaves the node's own origin. They hold no
// data; every figure comes from the /v1 API with the token the operator
// enters, so a tenant's console sees what that tenant's API calls see.
//
//	console.Register(engine) // GET /ui and /ui/*path
//
// docs/operations.md describes the pages; docs/console.md why the charts
// are plain SVG.
package console
