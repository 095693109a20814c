// Package httperr is the one mapping from errors to HTTP answers: a status
// and a stable machine-readable code per sentinel error, the JSON body
// {"error":{"code":..,"message":..}} every HTTP surface answers with, and the
// way back from a code to its sentinel for clients of those surfaces.
//
// Each sentinel is mapped once. Common holds the rows of the packages below
// the HTTP surfaces (the store's and the key format's, by kind, and the
// standard library's); the cluster's internal API and the server's public API add
// the rows of their own sentinels and join them with Common, so a cause
// gets the same answer on every surface (RESP keeps its own replies, chosen
// from the same sentinels).
//
// The store's and the key format's sentinels are Kinded: they name
// themselves ("tier.ErrNotFound") and Common names them the same way, so
// this package imports nothing of the project and stays a leaf.
package httperr
