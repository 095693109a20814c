// Package http is `yuebing bench http`: gets and puts of one node over HTTP
// through the Go client, beside raw TCP moving the same bytes.
package http
